// Random text from the OS CSPRNG (core/text/random_text): the length and
// alphabet asked for, every character about equally likely, fresh draws.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>
#include <string>

#include "core/plugin_host/error.hpp"
#include "core/text/random_text.hpp"

using areal::text::random_hex;
using areal::text::random_text;

TEST(RandomText, LengthAndAlphabetAsAsked) {
  for (size_t n : {0, 1, 43, 1000}) {
    const std::string s = random_text(n, "abc");
    EXPECT_EQ(s.size(), n);
    EXPECT_EQ(s.find_first_not_of("abc"), std::string::npos) << s;
  }
  const std::string h = random_hex(64);
  EXPECT_EQ(h.size(), 64u);
  EXPECT_EQ(h.find_first_not_of("0123456789abcdef"), std::string::npos) << h;
  EXPECT_EQ(random_text(5, "x"), "xxxxx");
}

TEST(RandomText, DrawsAreFresh) {
  std::set<std::string> seen;
  for (int i = 0; i < 1000; ++i) seen.insert(random_hex(32));  // 128 bits each: a repeat means a broken source
  EXPECT_EQ(seen.size(), 1000u);
}

// An alphabet whose size does not divide 256, where a byte taken modulo the
// size favours the first 256 % k characters: 600,000 draws over 10
// characters. Uniform, each count is within 5.5 standard deviations of
// 60,000 and the chi-square (9 degrees of freedom) below 45, each failing
// about once in a million runs or less; with the modulo bias the first six
// would be 1.6% high and the last four 2.3% low (4 and 6 deviations), a
// chi-square near 230.
TEST(RandomText, CharactersAreUniformWithoutModuloBias) {
  const std::string alphabet = "0123456789";
  const std::string s = random_text(600000, alphabet);
  std::map<char, int> counts;
  for (char c : s) ++counts[c];
  ASSERT_EQ(counts.size(), alphabet.size());
  const double expected = 60000, sd = std::sqrt(600000 * 0.1 * 0.9);
  double chi2 = 0;
  for (const auto& [c, n] : counts) {
    EXPECT_LT(std::abs(n - expected), 5.5 * sd) << c << ": " << n;
    chi2 += (n - expected) * (n - expected) / expected;
  }
  EXPECT_LT(chi2, 45.0);
}

TEST(RandomText, AnEmptyOrOversizedAlphabetIsRefused) {
  EXPECT_THROW(random_text(4, ""), areal::Error);
  EXPECT_THROW(random_text(4, std::string(257, 'a')), areal::Error);
}
