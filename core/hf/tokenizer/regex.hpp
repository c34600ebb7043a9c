// A small regex engine for tokenizer pre-tokenization patterns.
//
// Semantics follow Oniguruma (which Hugging Face tokenizers uses):
// leftmost-first alternation, greedy/lazy quantifiers, \s = White_Space,
// \p{..} general categories and scripts, (?i:..) case folding, lookahead,
// ^/$ as line anchors. Matching runs over code points with a memo of failed
// (instruction, position) states, so time is linear in the input for any
// supported pattern. Unsupported syntax (backreferences, lookbehind,
// possessive quantifiers, class intersection, quantified empty-matching
// groups) is a compile error naming the position, never a silent mismatch.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace areal::tokenizer {

class Regex {
 public:
  // Throws areal::Error(INVALID_ARGUMENT) with the offending position.
  explicit Regex(std::string_view pattern);
  ~Regex();
  Regex(Regex&&) noexcept;
  Regex& operator=(Regex&&) noexcept;

  // All non-overlapping matches, leftmost-first, as [begin, end) code point
  // index pairs over `text`. Empty matches are skipped.
  void find_all(const std::vector<char32_t>& text, std::vector<std::pair<uint32_t, uint32_t>>& out) const;

  // Length of the match starting exactly at `pos`, or -1.
  int64_t match_at(const std::vector<char32_t>& text, size_t pos) const;

  const std::string& pattern() const;

 private:
  struct Program;
  std::unique_ptr<Program> program_;
};

}  // namespace areal::tokenizer
