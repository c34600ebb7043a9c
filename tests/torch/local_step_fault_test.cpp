// A local engine step that throws (out of device memory, a device fault, a
// bug) ends the requests in that step with an error naming it, and the
// engine goes on serving: the queued requests and later ones complete.
// After a device fault dropping the cache can throw too (every CUDA call
// may); that used to end the scheduler thread, leaving every request, the
// failed ones included, waiting forever. The faults are injected with the
// engine's test hook (AREAL_TEST_LOCAL_STEP_FAULT).
#include <stdlib.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/hf/model_files/init_model.hpp"
#include "core/plugin_host/error.hpp"
#include "core/plugin_host/generation.hpp"
#include "local_engine.hpp"
#include "model_dir_once.hpp"

namespace {

std::string model() {
  areal::model::InitModelOptions o;
  o.family = "qwen3", o.preset = "tiny", o.seed = 5, o.tokenizer_dir = "bytes";
  return areal::testing::model_dir_once("step-fault-qwen3", o);
}

// Submits n requests of max_new tokens each; waits at most 30 s for each.
std::vector<areal::GenerationResult> generate(areal::testing::LocalEngine& engine, int n, int32_t max_new, bool* all_ended) {
  std::vector<std::vector<int32_t>> prompts;
  std::vector<std::unique_ptr<areal::CollectingSink>> sinks;
  for (int i = 0; i < n; ++i) prompts.push_back({static_cast<int32_t>(10 + i), 20, 30, static_cast<int32_t>(40 + i)});
  for (int i = 0; i < n; ++i) {
    areal_sampling_params s{};
    s.struct_size = AREAL_OFFSET_OF_END(areal_sampling_params, json_schema);
    s.temperature = 1.0f, s.top_p = 1.0f, s.max_new_tokens = max_new, s.ignore_eos = 1;
    s.has_seed = 1, s.seed = static_cast<uint64_t>(i);
    areal_gen_request r{};
    r.struct_size = AREAL_OFFSET_OF_END(areal_gen_request, adapter);
    r.request_id = areal::next_request_id();
    r.input_ids = prompts[static_cast<size_t>(i)].data(), r.input_ids_count = prompts[static_cast<size_t>(i)].size(), r.sampling = &s;
    sinks.push_back(std::make_unique<areal::CollectingSink>());
    areal::throw_if_status(engine.vt().submit(engine.instance.self(), &r, sinks.back()->sink()), "submit");
  }
  std::vector<areal::GenerationResult> out;
  *all_ended = true;
  for (auto& sink : sinks) {
    if (!sink->wait(std::chrono::seconds(30))) *all_ended = false;
    out.push_back(sink->result());
  }
  return out;
}

class LocalStepFault : public ::testing::TestWithParam<const char*> {
 protected:
  void TearDown() override { unsetenv("AREAL_TEST_LOCAL_STEP_FAULT"); }
};

// Round 3 of the scheduler throws: rounds 1 and 2 prefilled and decoded the
// first requests (two slots), so those end with the error, the ones queued
// behind them complete, and so does a request after.
TEST_P(LocalStepFault, TheStepsRequestsEndWithTheErrorAndTheEngineGoesOn) {
  setenv("AREAL_TEST_LOCAL_STEP_FAULT", GetParam(), 1);
  areal::testing::LocalEngine engine(nlohmann::json{{"model_path", model()}, {"max_batch", 2}});
  unsetenv("AREAL_TEST_LOCAL_STEP_FAULT");  // read when the engine starts
  bool all_ended = false;
  const auto results = generate(engine, 5, 6, &all_ended);
  ASSERT_TRUE(all_ended) << "a request never ended: the engine stopped serving";
  int failed = 0;
  for (const auto& r : results) {
    if (r.finish_reason == AREAL_FINISH_ERROR) {
      ++failed;
      EXPECT_NE(r.error_message.find("injected step fault"), std::string::npos) << r.error_message;
    } else {
      EXPECT_EQ(r.finish_reason, AREAL_FINISH_LENGTH) << r.error_message;
      EXPECT_EQ(r.output_ids.size(), 6u);
      EXPECT_EQ(r.logprobs.size(), 6u);
    }
  }
  // Two slots: the failed step held the first two requests, or only the
  // first where the scheduler ran two rounds before the second was submitted.
  EXPECT_GE(failed, 1) << "no request saw the injected fault";
  EXPECT_LE(failed, 2) << "more requests failed than the step held";
  const auto after = generate(engine, 1, 4, &all_ended);
  ASSERT_TRUE(all_ended);
  EXPECT_EQ(after[0].finish_reason, AREAL_FINISH_LENGTH) << after[0].error_message;
  EXPECT_EQ(after[0].output_ids.size(), 4u);
}

INSTANTIATE_TEST_SUITE_P(Faults, LocalStepFault, ::testing::Values("3", "3,drop"), [](const auto& info) {
  return std::string(info.param).find("drop") == std::string::npos ? std::string("step") : std::string("step_and_cache_drop");
});

}  // namespace
