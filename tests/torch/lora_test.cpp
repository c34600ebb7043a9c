// LoRA adapters on the decoder model (issue #34): the adapter's math against
// the merged weights W + scaling * B A computed here, gradients against
// central finite differences, PEFT's folder format both ways, and the clear
// refusals of what is not supported. PEFT itself checks our numbers in
// tests/parity/lora_peft.sh.
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/utils.h>

#include "core/hf/model_files/init_model.hpp"
#include "core/hf/model_files/safetensors.hpp"
#include "core/plugin_host/error.hpp"
#include "decoder_model.hpp"
#include "lora_adapter.hpp"
#include "model_dir_once.hpp"
#include "test_temp_dir.hpp"

using areal::torch_model::DecoderModel;
using areal::torch_model::LoraAdapter;
using areal::torch_model::LoraConfig;
using areal::torch_model::LoraModule;
namespace fs = std::filesystem;
using J = nlohmann::json;

namespace {

std::string tiny_model(const std::string& family, const std::string& preset = "tiny") {
  areal::model::InitModelOptions o;
  o.family = family, o.preset = preset, o.tokenizer_dir = "bytes", o.seed = 4;
  return areal::testing::model_dir_once("lora-" + preset + "-" + family, o);
}

// An adapter whose B is not zero (a trained one), so every target counts.
std::shared_ptr<LoraAdapter> trained_adapter(const DecoderModel& m, const J& config, torch::Dtype dtype) {
  auto a = std::make_shared<LoraAdapter>(LoraAdapter::init(LoraConfig::from_json(config, "lora"), m.config(), 7, torch::kCPU, dtype));
  torch::NoGradGuard no_grad;
  torch::manual_seed(9);
  for (auto& t : a->parameters()) t.add_(torch::randn_like(t) * 0.2);
  return a;
}

const torch::Tensor kIds = torch::tensor({5, 17, 42, 7, 99, 3, 11, 250, 64}, torch::kInt64);
const torch::Tensor kCu = torch::tensor({0, 4, 9}, torch::kInt64);

}  // namespace

class LoraFamily : public ::testing::TestWithParam<std::string> {};

// A fresh adapter (B = 0) is the base model; a trained one equals the model
// whose weights are W + scaling * B A, merged here by hand (rsLoRA's scaling
// too, and a subset of targets).
TEST_P(LoraFamily, AdapterEqualsTheMergedWeights) {
  const std::string dir = tiny_model(GetParam());
  DecoderModel m = DecoderModel::load(dir, torch::kFloat64);
  torch::NoGradGuard no_grad;
  const torch::Tensor base = m.logprobs(kIds, kCu, 0.8f);
  m.set_lora(std::make_shared<LoraAdapter>(LoraAdapter::init(LoraConfig::from_json(J{{"rank", 4}}, "lora"), m.config(), 1, torch::kCPU, torch::kFloat64)));
  EXPECT_TRUE(torch::equal(m.logprobs(kIds, kCu, 0.8f), base)) << "B = 0 must change nothing";

  for (const J& cfg : {J{{"rank", 4}, {"alpha", 8}, {"target_modules", "all-linear"}},
                       J{{"rank", 8}, {"alpha", 16}, {"use_rslora", true}, {"target_modules", {"q_proj", "v_proj", "down_proj"}}}}) {
    const auto adapter = trained_adapter(m, cfg, torch::kFloat64);
    m.set_lora(adapter);
    const torch::Tensor with_adapter = m.logprobs(kIds, kCu, 0.8f);
    m.set_lora(nullptr);
    DecoderModel merged = DecoderModel::load(dir, torch::kFloat64);
    // PEFT's scaling, written out here: lora_alpha / r, or / sqrt(r) with rsLoRA.
    const double rank = cfg["rank"].get<double>(), alpha = cfg["alpha"].get<double>();
    const double s = cfg.value("use_rslora", false) ? alpha / std::sqrt(rank) : alpha / rank;
    for (int64_t l = 0; l < m.config().num_hidden_layers; ++l)
      for (size_t k = 0; k < areal::torch_model::kLoraModules; ++k) {
        const auto mod = static_cast<LoraModule>(k);
        if (!adapter->a(l, mod).defined()) continue;
        const std::string name = "model.layers." + std::to_string(l) + "." + lora_module_parent(mod) + "." + lora_module_name(mod) + ".weight";
        const_cast<torch::Tensor&>(merged.p(name)).add_(torch::matmul(adapter->b(l, mod), adapter->a(l, mod)) * s);
      }
    const torch::Tensor want = merged.logprobs(kIds, kCu, 0.8f);
    EXPECT_LT((with_adapter - want).abs().max().item<double>(), 1e-12) << cfg.dump();
    EXPECT_GT((with_adapter - base).abs().max().item<double>(), 1e-3) << "the adapter must matter: " << cfg.dump();
  }
}

// With the base frozen, gradients reach exactly the adapter's A and B, and
// equal central finite differences.
TEST_P(LoraFamily, GradientsReachTheAdapterAndMatchFiniteDifferences) {
  DecoderModel m = DecoderModel::load(tiny_model(GetParam()), torch::kFloat64);
  for (const auto& t : m.parameters()) const_cast<torch::Tensor&>(t).set_requires_grad(false);
  const auto adapter = trained_adapter(m, J{{"rank", 2}, {"target_modules", "all-linear"}}, torch::kFloat64);
  m.set_lora(adapter);
  const torch::Tensor w = torch::linspace(-1.0, 1.0, kIds.size(0), torch::kFloat64);
  auto loss = [&] { return (m.logprobs(kIds, kCu, 1.0f) * w).sum(); };
  loss().backward();
  for (const auto& t : m.parameters()) EXPECT_FALSE(t.grad().defined()) << "a frozen base weight got a gradient";
  for (const auto& [mod, which] : std::vector<std::pair<LoraModule, char>>{{LoraModule::kQ, 'A'}, {LoraModule::kO, 'B'}, {LoraModule::kDown, 'A'},
                                                                           {LoraModule::kUp, 'B'}}) {
    torch::Tensor p = which == 'A' ? adapter->a(1, mod) : adapter->b(1, mod);
    ASSERT_TRUE(p.grad().defined());
    const torch::Tensor g = p.grad().flatten();
    torch::NoGradGuard no_grad;
    auto flat = p.view({-1});
    for (int64_t k : {int64_t{0}, flat.numel() / 2, flat.numel() - 1}) {
      const double eps = 1e-6, orig = flat[k].item<double>();
      flat[k] = orig + eps;
      const double up = loss().item<double>();
      flat[k] = orig - eps;
      const double down = loss().item<double>();
      flat[k] = orig;
      const double numeric = (up - down) / (2 * eps);
      EXPECT_NEAR(g[k].item<double>(), numeric, 1e-7 + 1e-5 * std::fabs(numeric)) << lora_module_name(mod) << " lora_" << which << "[" << k << "]";
    }
  }
}

// Gradient checkpointing with the base frozen: the recomputed layers pass
// gradients to the adapter alone (the base weights need none: asking autograd
// for them failed every step), and with dropout the recompute draws the masks
// the forward drew, so the gradients are those of the stored forward. Four
// layers (small): the first runs plainly (its input needs no gradient), the
// other three are recomputed, so a replay that did not put the generator
// back would leave it where layer 1's masks end, not where the forward ended.
TEST_P(LoraFamily, GradientCheckpointingGivesTheAdapterTheSameGradients) {
  for (const double dropout : {0.0, 0.3}) {
    std::vector<std::vector<torch::Tensor>> grads(2);
    std::vector<double> losses(2);
    for (int checkpoint = 0; checkpoint < 2; ++checkpoint) {
      DecoderModel m = DecoderModel::load(tiny_model(GetParam(), "small"), torch::kFloat64);
      ASSERT_GE(m.config().num_hidden_layers, 3);
      for (const auto& t : m.parameters()) const_cast<torch::Tensor&>(t).set_requires_grad(false);
      const auto adapter = trained_adapter(m, J{{"rank", 2}, {"dropout", dropout}, {"target_modules", "all-linear"}}, torch::kFloat64);
      adapter->set_training(true);
      m.set_lora(adapter);
      torch::manual_seed(11);
      const torch::Tensor w = torch::linspace(-1.0, 1.0, kIds.size(0), torch::kFloat64);
      const torch::Tensor loss = (m.logprobs(kIds, kCu, 1.0f, checkpoint == 1) * w).sum();
      loss.backward();
      losses[static_cast<size_t>(checkpoint)] = loss.item<double>();
      for (const auto& t : m.parameters()) EXPECT_FALSE(t.grad().defined()) << "a frozen base weight got a gradient";
      for (const auto& t : adapter->parameters()) {
        ASSERT_TRUE(t.grad().defined()) << "dropout " << dropout << (checkpoint ? ", checkpointed" : "");
        grads[static_cast<size_t>(checkpoint)].push_back(t.grad().clone());
      }
      // The draws after the step are the run's own: a replayed state is put back.
      grads[static_cast<size_t>(checkpoint)].push_back(torch::rand({4}, torch::kFloat64));
    }
    EXPECT_EQ(losses[0], losses[1]) << "dropout " << dropout;
    ASSERT_EQ(grads[0].size(), grads[1].size());
    for (size_t i = 0; i < grads[0].size(); ++i)
      EXPECT_TRUE(torch::allclose(grads[0][i], grads[1][i], 1e-12, 1e-14)) << "dropout " << dropout << ", tensor " << i << " of " << grads[0].size();
  }
}

INSTANTIATE_TEST_SUITE_P(Families, LoraFamily, ::testing::Values("qwen3", "qwen2", "llama3"));

// save writes PEFT's folder (config fields and key names as PEFT spells
// them); load reads it back to the same tensors and log-probs.
TEST(LoraFiles, PeftFolderRoundTrip) {
  const std::string dir = tiny_model("qwen3");
  DecoderModel m = DecoderModel::load(dir, torch::kFloat32);
  const auto adapter = trained_adapter(m, J{{"rank", 4}, {"alpha", 8}, {"target_modules", {"q_proj", "gate_proj"}}}, torch::kFloat32);
  const std::string out = areal::testing::test_temp_dir("lora-files") + "/adapter";
  adapter->save(out, dir);
  const J cfg = J::parse(std::ifstream(out + "/adapter_config.json"));
  EXPECT_EQ(cfg["peft_type"], "LORA");
  EXPECT_EQ(cfg["r"], 4);
  EXPECT_EQ(cfg["lora_alpha"], 8.0);
  EXPECT_EQ(cfg["target_modules"], (J{"q_proj", "gate_proj"}));
  EXPECT_EQ(cfg["base_model_name_or_path"], dir);
  const auto file = areal::model::SafetensorsFile::load(out + "/adapter_model.safetensors");
  EXPECT_EQ(file.tensors().size(), 2u * 2u * static_cast<size_t>(m.config().num_hidden_layers));
  const auto* qa = file.find("base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight");
  const auto* gb = file.find("base_model.model.model.layers.1.mlp.gate_proj.lora_B.weight");
  ASSERT_TRUE(qa && gb);
  EXPECT_EQ(qa->shape, (std::vector<int64_t>{4, m.config().hidden_size}));
  EXPECT_EQ(gb->shape, (std::vector<int64_t>{m.config().intermediate_size, 4}));

  const auto back = std::make_shared<LoraAdapter>(LoraAdapter::load(out, m.config()));
  const auto p1 = adapter->parameters(), p2 = back->parameters();
  ASSERT_EQ(p1.size(), p2.size());
  for (size_t i = 0; i < p1.size(); ++i) EXPECT_TRUE(torch::equal(p1[i], p2[i])) << i;
  torch::NoGradGuard no_grad;
  m.set_lora(adapter);
  const torch::Tensor a = m.logprobs(kIds, kCu, 1.0f);
  m.set_lora(back);
  EXPECT_TRUE(torch::equal(a, m.logprobs(kIds, kCu, 1.0f)));
}

// What would change the math and is not implemented is refused by name;
// broken folders name the file and the tensor.
TEST(LoraFiles, UnsupportedAndBrokenAdaptersAreRefusedByName) {
  const std::string dir = tiny_model("qwen3");
  DecoderModel m = DecoderModel::load(dir, torch::kFloat32);
  const auto adapter = trained_adapter(m, J{{"rank", 2}, {"target_modules", {"q_proj"}}}, torch::kFloat32);
  const std::string base = areal::testing::test_temp_dir("lora-refusals");
  auto expect_refused = [&](const std::string& name, const std::function<void(const std::string&)>& edit, int32_t code, const std::string& says) {
    const std::string out = base + "/" + name;
    adapter->save(out, dir);
    edit(out);
    try {
      LoraAdapter::load(out, m.config());
      ADD_FAILURE() << name << ": loaded";
    } catch (const areal::Error& e) {
      EXPECT_EQ(e.code(), code) << name << ": " << e.what();
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << name << ": " << e.what();
    }
  };
  auto set_config = [](const std::string& key, const J& value) {
    return [key, value](const std::string& out) {
      J cfg = J::parse(std::ifstream(out + "/adapter_config.json"));
      cfg[key] = value;
      std::ofstream(out + "/adapter_config.json") << cfg.dump();
    };
  };
  expect_refused("dora", set_config("use_dora", true), AREAL_CODE_UNSUPPORTED, "use_dora");
  expect_refused("regex", set_config("target_modules", ".*attn.*"), AREAL_CODE_UNSUPPORTED, "regular expression");
  expect_refused("pattern", set_config("rank_pattern", J{{"q_proj", 8}}), AREAL_CODE_UNSUPPORTED, "rank_pattern");
  expect_refused("alora", set_config("alora_invocation_tokens", J{1, 2}), AREAL_CODE_UNSUPPORTED, "alora_invocation_tokens");
  expect_refused("pissa", set_config("init_lora_weights", "pissa_niter_4"), AREAL_CODE_UNSUPPORTED, "init_lora_weights");
  expect_refused("unknown-module", set_config("target_modules", J{"qkv_proj"}), AREAL_CODE_INVALID_ARGUMENT, "qkv_proj");
  expect_refused("more-targets", set_config("target_modules", J{"q_proj", "k_proj"}), AREAL_CODE_INVALID_ARGUMENT,
                 "base_model.model.model.layers.0.self_attn.k_proj.lora_A.weight");
  expect_refused("wrong-rank", set_config("r", 3), AREAL_CODE_INVALID_ARGUMENT, "shape");
  expect_refused("no-weights", [](const std::string& out) { fs::remove(out + "/adapter_model.safetensors"); }, AREAL_CODE_NOT_FOUND,
                 "adapter_model.safetensors");
  try {
    LoraConfig::from_json(J{{"rank", 0}}, "train.lora");
    ADD_FAILURE() << "rank 0 accepted";
  } catch (const areal::Error& e) {
    EXPECT_NE(std::string(e.what()).find("train.lora.rank"), std::string::npos) << e.what();
  }
}

// target_modules as PEFT reads it: "<parent>.<name>" is that module in every
// layer, names this architecture lacks are ignored if one matches, a path
// into one layer cannot be an adapter here (refused, never widened), and
// "all-linear" (the YAML default) on a mixture-of-experts model is its
// attention, as PEFT expands it where experts are not linear layers.
TEST(LoraFiles, TargetModulesMatchAsPeftMatchesThem) {
  const auto q_only = LoraConfig::from_peft_json(J{{"r", 2}, {"target_modules", {"self_attn.q_proj", "c_attn"}}}, "t");
  for (size_t m = 0; m < q_only.targets.size(); ++m) EXPECT_EQ(q_only.targets[m], m == static_cast<size_t>(LoraModule::kQ)) << m;
  // PEFT saves its targets one path per layer and module: read as the module
  // (the tensors must cover every layer); in areal's YAML a one-layer path is refused.
  const auto saved = LoraConfig::from_peft_json(J{{"r", 2}, {"target_modules", {"model.layers.0.self_attn.q_proj", "model.layers.1.self_attn.q_proj"}}}, "t");
  EXPECT_TRUE(saved.targets[static_cast<size_t>(LoraModule::kQ)]);
  try {
    LoraConfig::from_json(J{{"target_modules", {"model.layers.0.self_attn.q_proj"}}}, "lora");
    ADD_FAILURE() << "a one-layer target was widened to every layer";
  } catch (const areal::Error& e) {
    EXPECT_EQ(e.code(), AREAL_CODE_UNSUPPORTED) << e.what();
  }
  EXPECT_THROW(LoraConfig::from_peft_json(J{{"r", 2}, {"target_modules", {"mlp.q_proj"}}}, "t"), areal::Error);  // no such module
  const DecoderModel moe = DecoderModel::load(tiny_model("qwen3_moe"), torch::kFloat32);
  const LoraAdapter a = LoraAdapter::init(LoraConfig::from_json(J::object(), "lora"), moe.config(), 3, torch::kCPU, torch::kFloat32);
  for (LoraModule m : {LoraModule::kQ, LoraModule::kK, LoraModule::kV, LoraModule::kO}) EXPECT_TRUE(a.config().targets[static_cast<size_t>(m)]);
  for (LoraModule m : {LoraModule::kGate, LoraModule::kUp, LoraModule::kDown}) EXPECT_FALSE(a.config().targets[static_cast<size_t>(m)]);
  EXPECT_THROW(LoraAdapter::init(LoraConfig::from_json(J{{"target_modules", {"gate_proj"}}}, "lora"), moe.config(), 3, torch::kCPU, torch::kFloat32),
               areal::Error);  // named expert targets stay refused
}
