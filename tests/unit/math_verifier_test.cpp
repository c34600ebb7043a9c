// The rlvr_math verifier: where the final answer is found and when two
// answers are the same.
#include <gtest/gtest.h>

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

}  // namespace
