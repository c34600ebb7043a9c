// The evaluation command's result line (host/evaluation): what becomes an
// {"eval": true} row of metrics.jsonl and what is refused, and why; and the
// agent process it runs.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "agent_process.hpp"
#include "evaluation.hpp"

namespace {

using areal::host::Evaluator;

TEST(EvaluationResult, TheLastJsonObjectLineWinsAndOnlyNumbersBecomeMetrics) {
  std::string error;
  const auto row = Evaluator::result_row(
      "starting\nitem {\"question\": \"q\"}\n{\"reward_mean\": 0.25}\nnoise on stderr\n"
      "{\"reward_mean\": 0.75, \"items\": 36, \"note\": \"text\", \"bad key\": 1, \"nested\": {\"a\": 1}}\n",
      &error);
  EXPECT_TRUE(error.empty()) << error;
  EXPECT_EQ(row, (nlohmann::json{{"eval_reward_mean", 0.75}, {"eval_items", 36}}));
}

TEST(EvaluationResult, RefusesOutputWithoutANumericRewardMean) {
  std::string error;
  EXPECT_TRUE(Evaluator::result_row("all good!\n", &error).is_null());
  EXPECT_NE(error.find("no JSON object line"), std::string::npos) << error;
  error.clear();
  EXPECT_TRUE(Evaluator::result_row("{\"reward\": 1}\n", &error).is_null());
  EXPECT_NE(error.find("no numeric reward_mean"), std::string::npos) << error;
  error.clear();
  EXPECT_TRUE(Evaluator::result_row("{\"reward_mean\": \"0.9\"}\n", &error).is_null());
  EXPECT_FALSE(error.empty());
  error.clear();
  EXPECT_TRUE(Evaluator::result_row("{\"reward_mean\": 0.9\n", &error).is_null());  // cut short
  EXPECT_FALSE(error.empty());
}

}  // namespace

// An agent runs in its config's directory, whatever that directory is called
// (a quote in it once broke the command, and could inject one).
TEST(AgentProcess, RunsInADirectoryWhoseNameHasAQuote) {
  const std::string dir = testing::TempDir() + "/it's \"here\" $(x)";
  std::filesystem::create_directories(dir);
  const std::string log = testing::TempDir() + "/agent-quote.log";
  areal::host::AgentProcess agent("pwd; test -d .", dir, {}, log);
  std::string report;
  for (int i = 0; i < 200 && (report = agent.exit_report()).empty(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_TRUE(agent.succeeded()) << report;
  std::ifstream in(log);
  std::string printed;
  std::getline(in, printed);
  EXPECT_EQ(printed, std::filesystem::canonical(dir).string());
}
