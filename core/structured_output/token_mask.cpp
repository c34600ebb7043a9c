#include "core/structured_output/token_mask.hpp"

#include <algorithm>

namespace areal::structured_output {
namespace {

// Whole UTF-8 characters, none of them '"', '\\' or a control character: a
// token any free JSON string content accepts.
bool plain_string_text(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const auto b = static_cast<uint8_t>(s[i]);
    if (b < 0x80) {
      if (b < 0x20 || b == '"' || b == '\\') return false;
      ++i;
      continue;
    }
    uint8_t n = 0, lo = 0, hi = 0;
    if (!utf8_lead(b, n, lo, hi) || i + n >= s.size()) return false;  // a character cut short
    for (uint8_t k = 1; k <= n; ++k) {
      const auto c = static_cast<uint8_t>(s[i + k]);
      if (c < lo || c > hi) return false;
      lo = 0x80, hi = 0xBF;
    }
    i += n + 1;
  }
  return true;
}

}  // namespace

VocabularyTrie::VocabularyTrie(const std::vector<std::string>& token_bytes) : vocab_size_(token_bytes.size()) {
  for (size_t id = 0; id < token_bytes.size(); ++id)
    if (!token_bytes[id].empty()) order_.push_back(static_cast<int32_t>(id));
  std::sort(order_.begin(), order_.end(), [&](int32_t a, int32_t b) { return token_bytes[a] < token_bytes[b]; });
  not_plain_before_.assign(order_.size() + 1, 0);
  for (size_t i = 0; i < order_.size(); ++i) not_plain_before_[i + 1] = not_plain_before_[i] + (plain_string_text(token_bytes[order_[i]]) ? 0 : 1);
  nodes_.push_back(Node{0, 0, static_cast<uint32_t>(order_.size())});
  build(0, 0, token_bytes);
}

// Tokens in [lo, hi) share their first `depth` bytes; a shorter token sorts
// before its extensions, so the ones that end here come first and each next
// byte's tokens are a contiguous run.
void VocabularyTrie::build(uint32_t node, uint32_t depth, const std::vector<std::string>& bytes) {
  const uint32_t lo = nodes_[node].lo, hi = nodes_[node].hi;
  uint32_t i = lo;
  while (i < hi && bytes[order_[i]].size() == depth) ++i;
  nodes_[node].end_here = i;
  const auto first = static_cast<uint32_t>(nodes_.size());
  while (i < hi) {
    const char c = bytes[order_[i]][depth];
    uint32_t j = i;
    while (j < hi && bytes[order_[j]][depth] == c) ++j;
    Node child{i, i, j};
    child.byte = static_cast<uint8_t>(c);
    nodes_.push_back(child);
    i = j;
  }
  nodes_[node].first_child = first;
  nodes_[node].children = static_cast<uint32_t>(nodes_.size()) - first;
  for (uint32_t c = first; c < first + nodes_[node].children; ++c) build(c, depth + 1, bytes);
}

// Walks the trie below `node` with m the matcher after the node's bytes.
// Under a budget, plain text in a free string value never lengthens the
// shortest completion (which the caller checked fits), so those subtrees are
// still taken whole; any other token is checked where it ends.
void VocabularyTrie::visit(uint32_t node, const JsonMatcher& m, std::vector<uint8_t>& allowed, size_t budget) const {
  const bool free_string = m.in_free_string();
  const bool free_name = budget != kUnlimited && free_string && m.in_free_property_name();
  const Node& n = nodes_[node];
  for (uint32_t c = n.first_child; c < n.first_child + n.children; ++c) {
    const Node& child = nodes_[c];
    if (free_string && !free_name && all_plain(child.lo, child.hi)) {
      for (uint32_t k = child.lo; k < child.hi; ++k) allowed[order_[k]] = 1;
      continue;
    }
    JsonMatcher next = m;
    if (!next.feed(child.byte)) continue;
    if (free_name && all_plain(child.lo, child.hi) && !next.property_name_may_be_declared()) {
      // A name no declared one begins with: every plain token below leaves
      // the same completion (close it, its value, the rest), so one check.
      const auto rest = next.shortest_completion();
      if (rest && rest->size() <= budget)
        for (uint32_t k = child.lo; k < child.hi; ++k) allowed[order_[k]] = 1;
      continue;
    }
    bool fits = child.end_here > child.lo;
    if (fits && budget != kUnlimited) {
      const auto rest = next.shortest_completion();
      fits = rest && rest->size() <= budget;
    }
    if (fits)
      for (uint32_t k = child.lo; k < child.end_here; ++k) allowed[order_[k]] = 1;
    if (child.children > 0) visit(c, next, allowed, budget);
  }
}

bool VocabularyTrie::allowed_tokens(const JsonMatcher& matcher, std::vector<uint8_t>& allowed, size_t completion_budget) const {
  allowed.assign(vocab_size_, 0);
  visit(0, matcher, allowed, completion_budget);
  return std::find(allowed.begin(), allowed.end(), 1) != allowed.end();
}

bool VocabularyTrie::prefix_tokens(std::string_view text, std::vector<uint8_t>& allowed) const {
  allowed.assign(vocab_size_, 0);
  bool any = false;
  uint32_t node = 0;
  for (char c : text) {
    const Node& n = nodes_[node];
    uint32_t next = 0;
    for (uint32_t ch = n.first_child; ch < n.first_child + n.children && next == 0; ++ch)
      if (nodes_[ch].byte == static_cast<uint8_t>(c)) next = ch;
    if (next == 0) break;  // no token spells the text this far
    for (uint32_t k = nodes_[next].lo; k < nodes_[next].end_here; ++k) allowed[order_[k]] = 1, any = true;
    node = next;
  }
  return any;
}

}  // namespace areal::structured_output
