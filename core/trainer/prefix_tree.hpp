// The rows of a batch that share token prefixes (a GRPO group's prompt, the
// turns of one session, retries and sub-agent branches) packed as a tree,
// each shared token once (issue #36). Token ids only: what a row trains
// (loss mask, log-probs, advantages) stays per row, and a row's tokens are
// found again through row_index, so a loss over the rows is the same loss.
//
// Layout: packed tokens in depth-first order, cut into segments, each a
// maximal run without a branch. A segment's tokens see the tokens of its
// ancestor segments and the earlier tokens of their own, nothing else: the
// attention of a row is the attention over its own path.
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace areal::trainer {

class PrefixTree {
 public:
  struct Segment {
    int64_t begin = 0, end = 0;  // packed tokens [begin, end)
    int64_t parent = -1;         // the segment it continues; -1 at a root
  };

  // Rows as token id sequences; an empty row takes no tokens.
  static PrefixTree build(const std::vector<std::vector<int32_t>>& rows);

  int64_t tokens() const { return static_cast<int64_t>(ids.size()); }
  // The row tokens the tree stands for (the per-row packing's length).
  int64_t row_tokens() const { return static_cast<int64_t>(row_index.size()); }
  // Packed index of row r's token t.
  int64_t index(std::size_t row, int64_t t) const { return row_index[static_cast<size_t>(row_offsets[row] + t)]; }
  // The segments a segment's tokens attend to, root first, itself last.
  std::vector<int64_t> path(int64_t segment) const;

  std::vector<int32_t> ids;        // [tokens]
  std::vector<int64_t> position;   // each token's position in every row through it (its depth)
  std::vector<int64_t> previous;   // the packed token before it in its rows; -1 at a row's start
  std::vector<int64_t> segment_of; // [tokens]
  std::vector<Segment> segments;   // parents before children
  std::vector<int64_t> row_offsets;  // [rows + 1] into row_index
  std::vector<int64_t> row_index;    // [row tokens]: packed index of each row token, rows back to back
};

// The tokens a tree would gain from each further row, for packing rows
// into micro-batches by the tokens their tree computes (the trie of
// PrefixTree::build, counted without laying it out).
class PrefixCounter {
 public:
  // Tokens of ids[0, n) not already in the tree: n minus the longest
  // prefix it shares with the rows added so far.
  int64_t new_tokens(const int32_t* ids, int64_t n) const;
  void add(const int32_t* ids, int64_t n);
  int64_t tokens() const { return nodes_; }
  void clear();

 private:
  std::unordered_map<uint64_t, int64_t> child_;  // (node << 32 | token) -> node; node 0 is the root
  int64_t nodes_ = 0;
};

}  // namespace areal::trainer
