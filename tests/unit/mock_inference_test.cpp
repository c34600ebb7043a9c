// The mock backend's documented behaviour, checked against an independent
// re-implementation of its distribution (docs/plugin-guide.md):
//   logit(j | p) = ((p*31 + j*17 + weights_seed*7) mod 97) / 10, softmax over j.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>
#include <memory>
#include <chrono>

#include <gtest/gtest.h>

#include "core/plugin_host/error.hpp"
#include "core/plugin_host/generation.hpp"
#include "core/plugin_host/plugin_instance.hpp"

namespace {

// log p(tok) under softmax(logit / temperature); greedy (0) counts as 1.
double reference_logprob(int prev, int tok, int vocab, int weights_seed, double temperature = 1.0) {
  const double t = temperature > 0 ? temperature : 1.0;
  auto logit = [&](int j) { return ((prev * 31 + j * 17 + weights_seed * 7) % 97) / 10.0 / t; };
  double z = 0;
  for (int j = 0; j < vocab; ++j) z += std::exp(logit(j));
  return logit(tok) - std::log(z);
}

int reference_argmax(int prev, int vocab, int weights_seed) {
  int best = 0;
  for (int j = 1; j < vocab; ++j)
    if (reference_logprob(prev, j, vocab, weights_seed) > reference_logprob(prev, best, vocab, weights_seed)) best = j;
  return best;
}

class MockInference : public ::testing::Test {
 protected:
  void start(const std::string& config) {
    plugin_ = areal::PluginLoader::load_file(std::string(AREAL_TEST_PLUGIN_DIR) + "/libareal-mock_inference.so");
    services_ = areal::make_services(name_);
    inst_ = std::make_unique<areal::PluginInstance>(plugin_, config, &services_);
  }
  areal::GenerationResult generate(std::vector<int32_t> input, int max_new, float temperature, uint64_t seed,
                                   std::vector<int32_t> stop = {}) {
    areal_sampling_params s{};
    s.struct_size = AREAL_OFFSET_OF_END(areal_sampling_params, stop_strings_count);
    s.temperature = temperature;
    s.top_p = 1.0f;
    s.max_new_tokens = max_new;
    s.seed = seed;
    s.has_seed = 1;
    s.stop_token_ids = stop.data();
    s.stop_token_ids_count = stop.size();
    areal_gen_request r{};
    r.struct_size = AREAL_OFFSET_OF_END(areal_gen_request, sampling);
    r.request_id = areal::next_request_id();
    r.input_ids = input.data();
    r.input_ids_count = input.size();
    r.sampling = &s;
    return areal::generate_blocking(*plugin_->inference(), inst_->self(), r, std::chrono::seconds(30));
  }
  std::string name_ = "inference";
  std::shared_ptr<areal::LoadedPlugin> plugin_;
  areal_services services_{};
  std::unique_ptr<areal::PluginInstance> inst_;
};

// ABI 1.2: log-probs of the sampling distribution softmax(logits / T).
TEST_F(MockInference, LogprobsAreThoseOfTheSamplingDistribution) {
  start(R"({"vocab_size": 50, "workers": 1})");
  for (float temperature : {0.0f, 0.7f, 1.0f, 1.5f}) {
    auto r = generate({3, 9}, 12, temperature, 11);
    ASSERT_EQ(r.output_ids.size(), 12u);
    int prev = 9;
    for (size_t i = 0; i < r.output_ids.size(); ++i) {
      EXPECT_NEAR(r.logprobs[i], reference_logprob(prev, r.output_ids[i], 50, 0, temperature), 1e-5) << "token " << i << " T " << temperature;
      prev = r.output_ids[i];
    }
  }
}

// The test servers' emulation of a backend's raw mode: temperature-1 values.
TEST_F(MockInference, RawLogprobModeReportsTemperatureOneValues) {
  start(R"({"vocab_size": 50, "workers": 1, "logprob_mode": "raw"})");
  auto r = generate({3, 9}, 8, 1.5f, 11);
  int prev = 9;
  for (size_t i = 0; i < r.output_ids.size(); ++i) {
    EXPECT_NEAR(r.logprobs[i], reference_logprob(prev, r.output_ids[i], 50, 0), 1e-5) << "token " << i;
    EXPECT_GT(std::abs(r.logprobs[i] - reference_logprob(prev, r.output_ids[i], 50, 0, 1.5)), 1e-4);
    prev = r.output_ids[i];
  }
}

TEST_F(MockInference, GreedyFollowsTheArgmaxChain) {
  start(R"({"vocab_size": 40})");
  auto r = generate({5}, 6, 0.0f, 1);
  int prev = 5;
  for (int32_t tok : r.output_ids) {
    EXPECT_EQ(tok, reference_argmax(prev, 40, 0));
    prev = tok;
  }
}

TEST_F(MockInference, EosStopsWithStopAndContextLimitStopsWithLength) {
  start(R"({"vocab_size": 40, "max_context": 6})");
  auto greedy = generate({5}, 3, 0.0f, 1);
  auto stopped = generate({5}, 3, 0.0f, 1, {greedy.output_ids[0]});
  EXPECT_EQ(stopped.output_ids.size(), 1u);
  EXPECT_EQ(stopped.finish_reason, AREAL_FINISH_STOP);
  auto limited = generate({1, 2, 3, 4}, 100, 1.0f, 3);  // 6 - 4 = 2 tokens of room
  EXPECT_EQ(limited.output_ids.size(), 2u);
  EXPECT_EQ(limited.finish_reason, AREAL_FINISH_LENGTH);
  EXPECT_THROW(generate({1, 2, 3, 4, 5, 6}, 1, 1.0f, 1), areal::Error);  // no room at all
  EXPECT_THROW(generate({40}, 1, 1.0f, 1), areal::Error);                // outside the vocabulary
}

TEST_F(MockInference, UpdateWeightsChangesTheDistributionAndStampsTheNewVersion) {
  start(R"({"vocab_size": 30})");
  const auto& vt = *plugin_->inference();
  const std::string spec = R"({"type": "mock", "weights_seed": 5, "version": 3})";
  areal::throw_if_status(vt.update_weights(inst_->self(), areal_str{spec.data(), spec.size()}), "update");
  auto r = generate({2}, 4, 1.0f, 9);
  int prev = 2;
  for (size_t i = 0; i < r.output_ids.size(); ++i) {
    EXPECT_EQ(r.versions[i], 3);
    EXPECT_NEAR(r.logprobs[i], reference_logprob(prev, r.output_ids[i], 30, 5), 1e-5);
    prev = r.output_ids[i];
  }
  const std::string disk = R"({"type": "disk", "path": "/tmp/x", "version": 4})";
  areal::StatusPtr st(vt.update_weights(inst_->self(), areal_str{disk.data(), disk.size()}));
  EXPECT_EQ(areal::status_code(st.get()), AREAL_CODE_UNSUPPORTED);
}

TEST_F(MockInference, ScriptModeReplaysRepliesInSubmissionOrder) {
  start(R"({"vocab_size": 50, "script": [[4, 5, 6], [7]]})");
  auto a = generate({1}, 10, 1.0f, 3);
  auto b = generate({1}, 10, 1.0f, 3);
  auto c = generate({1}, 2, 1.0f, 3);  // the first reply again, cut by max_new_tokens
  EXPECT_EQ(a.output_ids, (std::vector<int32_t>{4, 5, 6}));
  EXPECT_EQ(a.finish_reason, AREAL_FINISH_STOP);
  EXPECT_EQ(b.output_ids, (std::vector<int32_t>{7}));
  EXPECT_EQ(c.output_ids, (std::vector<int32_t>{4, 5}));
  EXPECT_EQ(c.finish_reason, AREAL_FINISH_LENGTH);
  EXPECT_NEAR(a.logprobs[1], reference_logprob(4, 5, 50, 0), 1e-5);  // still the mock's distribution
  EXPECT_THROW(start(R"({"vocab_size": 50, "script": [[99]]})"), areal::Error);
}

TEST_F(MockInference, DestroyWithRequestsInFlightCallsEveryOnDone) {
  start(R"({"token_delay_ms": 5, "workers": 1})");
  const auto& vt = *plugin_->inference();
  std::vector<std::unique_ptr<areal::CollectingSink>> sinks;
  std::vector<int32_t> input{1};
  areal_sampling_params s{};
  s.struct_size = AREAL_OFFSET_OF_END(areal_sampling_params, stop_strings_count);
  s.temperature = 1.0f;
  s.top_p = 1.0f;
  s.max_new_tokens = 1000;
  for (int i = 0; i < 4; ++i) {
    sinks.push_back(std::make_unique<areal::CollectingSink>());
    areal_gen_request r{AREAL_OFFSET_OF_END(areal_gen_request, sampling), areal::next_request_id(), {}, input.data(), 1, &s, {}, 0};
    areal::throw_if_status(vt.submit(inst_->self(), &r, sinks.back()->sink()), "submit");
  }
  inst_.reset();  // destroy: one running, three queued
  for (auto& sink : sinks) {
    ASSERT_TRUE(sink->wait(std::chrono::seconds(0)));
    EXPECT_EQ(sink->result().on_done_calls, 1);
    EXPECT_EQ(sink->result().finish_reason, AREAL_FINISH_ABORT);
  }
}

}  // namespace
