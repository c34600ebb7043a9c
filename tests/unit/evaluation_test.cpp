// The evaluation command's result line (host/evaluation): what becomes an
// {"eval": true} row of metrics.jsonl and what is refused, and why.
#include <string>

#include <gtest/gtest.h>

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
