// The tokenizer regex engine: Oniguruma semantics on the constructs HF
// tokenizer.json files use, and clear errors for what it does not support.
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/plugin_host/error.hpp"
#include "core/hf/tokenizer/regex.hpp"
#include "core/hf/tokenizer/unicode.hpp"

using areal::tokenizer::Regex;

namespace {

std::vector<std::string> split(const std::string& pattern, const std::string& text) {
  std::vector<char32_t> cps;
  std::vector<uint32_t> offs;
  areal::unicode::decode_utf8(text, cps, offs);
  std::vector<std::pair<uint32_t, uint32_t>> m;
  Regex(pattern).find_all(cps, m);
  std::vector<std::string> out;
  for (auto [b, e] : m) out.push_back(text.substr(offs[b], offs[e] - offs[b]));
  return out;
}

using V = std::vector<std::string>;

}  // namespace

TEST(Regex, AlternationIsLeftmostFirstNotLongest) {
  EXPECT_EQ(split("a|ab", "ab"), V({"a"}));
  EXPECT_EQ(split("ab|a", "ab"), V({"ab"}));
}

TEST(Regex, GreedyAndLazyQuantifiers) {
  EXPECT_EQ(split("a+", "aaa b aa"), V({"aaa", "aa"}));
  EXPECT_EQ(split("a+?", "aaa"), V({"a", "a", "a"}));
  EXPECT_EQ(split("x\\d{1,3}", "x12345 x1"), V({"x123", "x1"}));
  EXPECT_EQ(split("(?:ab){2}", "ababab"), V({"abab"}));
}

TEST(Regex, UnicodePropertiesAndWhiteSpace) {
  EXPECT_EQ(split("\\p{L}+", "héllo 世界 123"), V({"héllo", "世界"}));
  EXPECT_EQ(split("\\p{N}", "a1½٣"), V({"1", "½", "٣"}));
  EXPECT_EQ(split("\\s+", "a \t\u00a0\u3000b"), V({" \t\u00a0\u3000"}));
  EXPECT_EQ(split("[^\\s\\p{L}]+", "ab!? cd"), V({"!?"}));
  EXPECT_EQ(split("\\p{Han}+", "漢字かな"), V({"漢字"}));
}

TEST(Regex, CaseInsensitiveGroupAndNegativeLookahead) {
  EXPECT_EQ(split("(?i:'s|'ll)", "it's WE'LL"), V({"'s", "'LL"}));
  // The GPT-4/Qwen idiom: trailing spaces stay apart from the next word.
  EXPECT_EQ(split("\\s+(?!\\S)|\\s+", "a   b"), V({"  ", " "}));
  EXPECT_EQ(split("a(?=b)", "ab ac"), V({"a"}));
}

TEST(Regex, TheQwenPatternSplitsLikeHf) {
  const std::string qwen = R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  EXPECT_EQ(split(qwen, "Hello world! It's 42.\n\n  ok"),
            V({"Hello", " world", "!", " It", "'s", " ", "4", "2", ".\n\n", " ", " ok"}));
}

TEST(Regex, UnsupportedSyntaxIsAnErrorNotAGuess) {
  // Truncated ones too: each is an error, never a read past the pattern.
  for (const char* p : {"(a)\\1", "(?<=a)b", "a++", "[a-z&&[^b]]", "(a*)*", "(?x)a", "[abc", "(ab", "\\p{NoSuchProperty}", "\\q",
                        "(?", "[\\", "a{99999999999}", "a{2,99999999999}"}) {
    EXPECT_THROW(Regex{p}, areal::Error) << p;
  }
}

TEST(Regex, LongInputsStayLinear) {
  // Without the failure memo, this classic pattern backtracks exponentially.
  std::string text(5000, 'a');
  std::vector<char32_t> cps(text.begin(), text.end());
  std::vector<std::pair<uint32_t, uint32_t>> m;
  Regex("(?:a|aa)+b").find_all(cps, m);
  EXPECT_TRUE(m.empty());
}
