#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>
#include <memory>

#include <gtest/gtest.h>

#include "core/recorder/episode_recorder.hpp"
#include "core/plugin_host/error.hpp"
#include "core/plugin_host/plugin_instance.hpp"

namespace {

class EpisodeRecording : public ::testing::Test {
 protected:
  void SetUp() override {
    plugin_ = areal::PluginLoader::load_file(std::string(AREAL_TEST_PLUGIN_DIR) + "/libareal-mock_inference.so");
    services_ = areal::make_services(name_);
    inst_ = std::make_unique<areal::PluginInstance>(plugin_, R"({"vocab_size": 64})", &services_);
    rec_ = std::make_unique<areal::EpisodeRecorder>("ep7", plugin_->inference(), inst_->self(), 7);
  }
  const areal_completion* generate(std::vector<int32_t> input, int n) {
    areal_sampling_params s{};
    s.struct_size = AREAL_OFFSET_OF_END(areal_sampling_params, stop_strings_count);
    s.temperature = 1.0f;
    s.top_p = 1.0f;
    s.max_new_tokens = n;
    areal_gen_request r{AREAL_OFFSET_OF_END(areal_gen_request, sampling), 0, {}, input.data(), input.size(), &s};
    const areal_completion* c = nullptr;
    areal::throw_if_status(rec_->api()->generate(rec_->api()->ctx, &r, &c), "generate");
    return c;
  }
  int32_t set_reward(const std::string& id, double r) {
    return areal::status_code(areal::StatusPtr(rec_->api()->set_reward(rec_->api()->ctx, areal_str{id.data(), id.size()}, r)).get());
  }
  std::string name_ = "inference";
  std::shared_ptr<areal::LoadedPlugin> plugin_;
  areal_services services_{};
  std::unique_ptr<areal::PluginInstance> inst_;
  std::unique_ptr<areal::EpisodeRecorder> rec_;
};

TEST_F(EpisodeRecording, RecordsEveryCompletionAndItsReward) {
  EXPECT_EQ(set_reward("", 1.0), AREAL_CODE_FAILED_PRECONDITION);  // nothing to reward yet
  const areal_completion* a = generate({1, 2}, 3);
  const std::string a_id(a->completion_id.data, a->completion_id.size);
  const std::vector<int32_t> a_ids(a->output_ids, a->output_ids + a->count);
  generate({4}, 2);
  EXPECT_EQ(set_reward(a_id, 0.25), AREAL_CODE_OK);
  EXPECT_EQ(set_reward("", 1.0), AREAL_CODE_OK);  // the last completion
  EXPECT_EQ(set_reward("ep7-c9", 1.0), AREAL_CODE_NOT_FOUND);
  EXPECT_EQ(set_reward("", std::nan("")), AREAL_CODE_INVALID_ARGUMENT);
  auto j = rec_->to_json();
  ASSERT_EQ(j["completions"].size(), 2u);
  EXPECT_EQ(j["completions"][0]["input_ids"], nlohmann::json({1, 2}));
  EXPECT_EQ(j["completions"][0]["output_ids"], nlohmann::json(a_ids));
  EXPECT_EQ(j["completions"][0]["reward"], 0.25);
  EXPECT_EQ(j["completions"][1]["reward"], 1.0);
  EXPECT_EQ(j["completions"][1]["logprobs"].size(), 2u);
}

TEST_F(EpisodeRecording, ResultRewardGoesToTheLastCompletionAndBadResultsAreErrors) {
  generate({1}, 2);
  rec_->apply_result(nlohmann::json::parse(R"({"reward": 0.5, "note": "x"})"));
  EXPECT_EQ(rec_->record().rewards(), std::vector<double>{0.5});
  EXPECT_THROW(rec_->apply_result(nlohmann::json::parse(R"({"reward": "high"})")), areal::Error);
  EXPECT_THROW(rec_->apply_result(nlohmann::json::parse("[1]")), areal::Error);
  EXPECT_NO_THROW(rec_->apply_result(nlohmann::json::object()));  // rewards left to set_reward
}

TEST_F(EpisodeRecording, SeedsAreDerivedFromTheEpisodeSoRunsReproduce) {
  const areal_completion* a = generate({3}, 5);
  std::vector<int32_t> first(a->output_ids, a->output_ids + a->count);
  areal::EpisodeRecorder again("ep7", plugin_->inference(), inst_->self(), 7);
  rec_.reset();
  areal_sampling_params s{};
  s.struct_size = AREAL_OFFSET_OF_END(areal_sampling_params, stop_strings_count);
  s.temperature = 1.0f;
  s.top_p = 1.0f;
  s.max_new_tokens = 5;
  std::vector<int32_t> in{3};
  areal_gen_request r{AREAL_OFFSET_OF_END(areal_gen_request, sampling), 0, {}, in.data(), 1, &s};
  const areal_completion* b = nullptr;
  areal::throw_if_status(again.api()->generate(again.api()->ctx, &r, &b), "generate");
  EXPECT_EQ(first, std::vector<int32_t>(b->output_ids, b->output_ids + b->count));
}

// What a workflow's generate asks of the sampling reaches the engine: the
// ABI 1.3 fields (penalties, logit_bias, structured output) too, which the
// host used to cut off at the 1.2 size.
const areal_inference_vtable* wrapped = nullptr;
areal_sampling_params seen{};
areal_status* capturing_submit(void* self, const areal_gen_request* r, const areal_gen_sink* sink) {
  seen = areal_sampling_params{};
  std::memcpy(&seen, r->sampling, std::min<size_t>(r->sampling->struct_size, sizeof seen));
  return wrapped->submit(self, r, sink);
}

TEST_F(EpisodeRecording, TheWorkflowsSamplingReachesTheEngineWhole) {
  wrapped = plugin_->inference();
  areal_inference_vtable table = *wrapped;
  table.submit = capturing_submit;
  areal::EpisodeRecorder rec("ep9", &table, inst_->self(), 7);
  const areal_logit_bias bias{5, 2.5f};
  const std::string schema = R"({"type": "object"})";
  areal_sampling_params s{};
  s.struct_size = AREAL_OFFSET_OF_END(areal_sampling_params, json_schema);
  s.temperature = 1.0f, s.top_p = 1.0f, s.max_new_tokens = 2;
  s.presence_penalty = 0.5f, s.frequency_penalty = -0.25f;
  s.logit_bias = &bias, s.logit_bias_count = 1;
  s.structured_output = AREAL_STRUCTURED_JSON_SCHEMA, s.json_schema = areal_str{schema.data(), schema.size()};
  std::vector<int32_t> in{3};
  areal_gen_request r{AREAL_OFFSET_OF_END(areal_gen_request, sampling), 0, {}, in.data(), 1, &s};
  const areal_completion* c = nullptr;
  areal::StatusPtr st(rec.api()->generate(rec.api()->ctx, &r, &c));  // the mock may refuse structured output; what it was asked is the point
  EXPECT_EQ(seen.struct_size, AREAL_OFFSET_OF_END(areal_sampling_params, json_schema));
  EXPECT_EQ(seen.presence_penalty, 0.5f);
  EXPECT_EQ(seen.frequency_penalty, -0.25f);
  ASSERT_EQ(seen.logit_bias_count, 1u);
  EXPECT_EQ(seen.structured_output, AREAL_STRUCTURED_JSON_SCHEMA);
  EXPECT_EQ(std::string(seen.json_schema.data, seen.json_schema.size), schema);
  EXPECT_TRUE(seen.has_seed) << "the episode's derived seed";
}

}  // namespace
