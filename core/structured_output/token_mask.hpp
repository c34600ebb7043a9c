// Constrained decoding, part 2: which vocabulary tokens can continue a
// JsonMatcher's output. The vocabulary is a byte trie; the walk copies the
// matcher down each branch and prunes a branch at its first rejected byte,
// and inside free string contents accepts whole subtrees of plain tokens at
// once (the common case: a mask over 150k tokens costs a few milliseconds).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/structured_output/json_schema_matcher.hpp"

namespace areal::structured_output {

class VocabularyTrie {
 public:
  // token_bytes[id]: the bytes token id adds to the output; "" for tokens
  // that never belong inside structured output (special tokens, padding).
  explicit VocabularyTrie(const std::vector<std::string>& token_bytes);

  // Sets allowed[id] = 1 for every token the matcher accepts as its next
  // bytes (allowed is resized to the vocabulary and cleared first), and with
  // a completion budget only those after which the shortest completion
  // (JsonMatcher::shortest_completion) has at most that many bytes; the
  // caller checks the matcher's own shortest completion fits the budget
  // first. Returns whether any is. End of output is not a token here: the caller allows its
  // stop tokens when matcher.complete().
  bool allowed_tokens(const JsonMatcher& matcher, std::vector<uint8_t>& allowed, size_t completion_budget = kUnlimited) const;
  static constexpr size_t kUnlimited = SIZE_MAX;
  // Sets allowed[id] = 1 for every token whose bytes are a non-empty prefix
  // of text (allowed is resized and cleared first): the tokens that follow a
  // fixed continuation such as JsonMatcher::shortest_completion(). Returns
  // whether there is any.
  bool prefix_tokens(std::string_view text, std::vector<uint8_t>& allowed) const;

  size_t vocab_size() const { return vocab_size_; }

 private:
  struct Node {
    uint32_t lo, end_here, hi;  // order_[lo, end_here): tokens ending at this node; [lo, hi): the subtree
    uint32_t first_child = 0, children = 0;
    uint8_t byte = 0;
  };
  void build(uint32_t node, uint32_t depth, const std::vector<std::string>& bytes);
  void visit(uint32_t node, const JsonMatcher& m, std::vector<uint8_t>& allowed, size_t budget) const;
  bool all_plain(uint32_t lo, uint32_t hi) const { return not_plain_before_[hi] == not_plain_before_[lo]; }

  size_t vocab_size_ = 0;
  std::vector<int32_t> order_;              // token ids sorted by their bytes
  std::vector<uint32_t> not_plain_before_;  // prefix counts over order_ of tokens that are not plain string text
  std::vector<Node> nodes_;
};

}  // namespace areal::structured_output
