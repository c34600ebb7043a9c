// What the dashboard reads from a run directory (host/dashboard/run_data):
// metrics rows from a byte offset while the file grows, and the latest
// sessions as text.
#include <filesystem>
#include <fstream>
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/hf/model_files/byte_tokenizer.hpp"
#include "dashboard/run_data.hpp"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace areal::host::dashboard;

struct RunDir : ::testing::Test {
  void SetUp() override {
    dir = fs::temp_directory_path() / ("areal-dashboard-test-" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  void TearDown() override { fs::remove_all(dir); }
  void append(const std::string& file, const std::string& text) { std::ofstream(dir / file, std::ios::app) << text; }
  fs::path dir;
};

TEST_F(RunDir, MetricsComeFromTheOffsetOnAndAHalfWrittenLineWaits) {
  EXPECT_EQ(metrics_since(dir.string(), 0)["rows"].size(), 0u);  // no file yet
  append("metrics.jsonl", "{\"step\": 1, \"reward_mean\": 0.5, \"sample_versions\": [0, 0], \"session_ids\": [\"a\"]}\n{\"step\": 2, \"rew");
  json a = metrics_since(dir.string(), 0);
  ASSERT_EQ(a["rows"].size(), 1u);
  EXPECT_EQ(a["rows"][0], (json{{"step", 1}, {"reward_mean", 0.5}}));  // per-sample lists dropped
  append("metrics.jsonl", "ard_mean\": 0.75}\n{\"eval\": true, \"step\": 2, \"eval_reward_mean\": 1}\n");
  json b = metrics_since(dir.string(), a["offset"].get<uint64_t>());
  ASSERT_EQ(b["rows"].size(), 2u);
  EXPECT_EQ(b["rows"][0]["reward_mean"], 0.75);
  EXPECT_EQ(b["rows"][1]["eval_reward_mean"], 1);
  EXPECT_EQ(b["offset"].get<uint64_t>(), fs::file_size(dir / "metrics.jsonl"));
  // A rewritten (shorter) file starts over.
  std::ofstream(dir / "metrics.jsonl", std::ios::trunc) << "{\"step\": 1}\n";
  EXPECT_EQ(metrics_since(dir.string(), b["offset"].get<uint64_t>())["rows"].size(), 1u);
}

TEST_F(RunDir, LatestSessionsAreNewestFirstAsText) {
  areal::model::write_byte_tokenizer((dir / "tok").string());
  const auto tok = areal::tokenizer::Tokenizer::from_dir((dir / "tok").string());
  auto record = [](const std::string& id, std::vector<int32_t> prompt, std::vector<int32_t> answer, double reward) {
    std::vector<int32_t> ids = prompt, mask(prompt.size(), 0);
    std::vector<int64_t> versions(prompt.size(), -1);
    for (int32_t t : answer) ids.push_back(t), mask.push_back(1), versions.push_back(7);
    return json{{"session_id", id}, {"task", 3}, {"status", "ok"},
                {"rows", {{{"input_ids", ids}, {"loss_mask", mask}, {"versions", versions}, {"reward", reward}}}}}.dump() + "\n";
  };
  append("rollouts.jsonl", record("s1", {'H', 'i'}, {'4', 258}, 1.0));
  append("rollouts.jsonl", "{\"session_id\": \"dropped\", \"status\": \"dropped_stale\"}\n");
  append("rollouts.jsonl", record("s2", {'Y', 'o'}, {'5'}, 0.0));
  const json s = latest_sessions(dir.string(), 5, tok.get())["sessions"];
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0]["session_id"], "s2");
  EXPECT_EQ(s[0]["prompt"], "Yo");
  EXPECT_EQ(s[0]["answer"], "5");
  EXPECT_EQ(s[1]["answer"], "4<|im_end|>");
  EXPECT_EQ(s[1]["reward"], 1.0);
  EXPECT_EQ(s[1]["version"], 7);
  EXPECT_EQ(latest_sessions(dir.string(), 1, tok.get())["sessions"].size(), 1u);
  EXPECT_EQ(latest_sessions(dir.string(), 5, nullptr)["sessions"][0]["answer"], "[53]");  // no tokenizer: the ids
}

// Inline and subproc workflows write episodes ("completions", not "rows"),
// and an agent session's record can be far longer than the tail first read.
TEST_F(RunDir, LatestSessionsShowEpisodesAndRecordsOfAnySize) {
  areal::model::write_byte_tokenizer((dir / "tok").string());
  const auto tok = areal::tokenizer::Tokenizer::from_dir((dir / "tok").string());
  append("rollouts.jsonl", json{{"episode_id", "e1"}, {"task", 4}, {"status", "ok"},
                                {"completions", {{{"input_ids", {'Q'}}, {"output_ids", {'7'}}, {"versions", {2}}, {"reward", 0.5}}}}}
                               .dump() + "\n");
  const std::vector<int32_t> long_prompt(300000, 'a');  // a ~1.2 MB record
  append("rollouts.jsonl", json{{"episode_id", "e2"}, {"task", 5}, {"status", "ok"},
                                {"completions", {{{"input_ids", long_prompt}, {"output_ids", {'8'}}, {"versions", {3}}, {"reward", 1.0}}}}}
                               .dump() + "\n");
  const json s = latest_sessions(dir.string(), 2, tok.get())["sessions"];
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0]["session_id"], "e2");
  EXPECT_EQ(s[0]["answer"], "8");
  EXPECT_EQ(s[0]["version"], 3);
  EXPECT_EQ(s[1]["session_id"], "e1");
  EXPECT_EQ(s[1]["prompt"], "Q");
  EXPECT_EQ(s[1]["reward"], 0.5);
}

}  // namespace
