// The rlvr_math verifier: where the final answer is found and when two
// answers are the same.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "math_verifier.hpp"

namespace {

using namespace areal::workflows;

TEST(MathVerifier, FindsTheFinalAnswer) {
  EXPECT_EQ(extract_final_answer("so it is \\boxed{42}."), "42");
  EXPECT_EQ(extract_final_answer("\\boxed{1} then \\boxed{\\frac{1}{2}}"), "\\frac{1}{2}");  // the last, braces balanced
  EXPECT_EQ(extract_final_answer("Work: 3*4 = 12\nAnswer: 12 apples\nthanks"), "12 apples");
  EXPECT_EQ(extract_final_answer("7 + 5 makes 12, minus 2 is 10."), "10");
  EXPECT_EQ(extract_final_answer("it costs -3.5 dollars"), "-3.5");
  EXPECT_EQ(extract_final_answer("a total of 1,234"), "1,234");
  EXPECT_FALSE(extract_final_answer("no digits here").has_value());
}

TEST(MathVerifier, ComparesNumbersAndText) {
  EXPECT_TRUE(answers_match("12", "12"));
  EXPECT_TRUE(answers_match("12.0", "12"));
  EXPECT_TRUE(answers_match("1,234", "1234"));
  EXPECT_TRUE(answers_match("$5", "5"));
  EXPECT_TRUE(answers_match("3/4", "0.75"));
  EXPECT_TRUE(answers_match("50%", "50"));
  EXPECT_FALSE(answers_match("13", "12"));
  EXPECT_FALSE(answers_match("1/0", "0"));
  EXPECT_TRUE(answers_match(" Paris ", "paris"));
  EXPECT_FALSE(answers_match("12 apples", "12"));  // text that is not a number compares as text
  EXPECT_FALSE(parse_number("").has_value());
}

// What models write inside \boxed{} and after "Answer:", against the
// dataset's plain reference: each the same answer.
TEST(MathVerifier, LatexAndMarkdownFormsOfTheSameAnswerMatch) {
  const std::vector<std::pair<std::string, std::string>> same = {
      {"\\boxed{\\$18}", "18"},           {"\\boxed{18\\%}", "18"},          {"\\boxed{\\frac{1}{2}}", "1/2"},
      {"\\boxed{\\dfrac{1}{2}}", "0.5"},  {"\\boxed{x = 5}", "5"},            {"\\boxed{5 \\text{ apples}}", "5"},
      {"\\boxed{90^\\circ}", "90"},       {"\\boxed{-\\frac{1}{2}}", "-1/2"}, {"Answer: $42$", "42"},
      {"**Answer:** 42", "42"},            {"\\boxed{1,234,567}", "1234567"}, {"so x = \u22127", "-7"},
  };
  for (const auto& [reply, reference] : same) {
    const auto answer = extract_final_answer(reply);
    ASSERT_TRUE(answer.has_value()) << reply;
    EXPECT_TRUE(answers_match(*answer, reference)) << reply << " -> " << *answer << " vs " << reference;
  }
}

// And what only looks alike is not the same answer.
TEST(MathVerifier, ListsAndDroppedSignsAreNotTheAnswer) {
  EXPECT_FALSE(answers_match("1,2", "12"));   // two roots, not twelve
  EXPECT_FALSE(answers_match("2,5", "25"));   // a decimal comma
  EXPECT_FALSE(answers_match(*extract_final_answer("so x = \u22127"), "7"));
  EXPECT_FALSE(parse_number("1/2/3").has_value());
  EXPECT_FALSE(parse_number(std::string(50000, '/')).has_value());  // no recursion to overflow
  EXPECT_FALSE(parse_number("0x1A").has_value());
}

}  // namespace
