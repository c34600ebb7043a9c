// PrefixTree (issue #36): rows sharing prefixes packed once, each row found
// again, each token seeing exactly its own row's earlier tokens.
#include <cstdint>
#include <random>
#include <set>
#include <vector>

#include <gtest/gtest.h>

#include "core/trainer/prefix_tree.hpp"

using areal::trainer::PrefixTree;

namespace {

using Rows = std::vector<std::vector<int32_t>>;

// What must hold for any rows: each row's tokens are found again at their
// positions, each token follows its row's previous token, the tree has one
// token per distinct prefix (counted here with a set, not a trie), and a
// token's visible tokens (its segments' path up to itself) are exactly its
// row's earlier tokens.
void check_invariants(const Rows& rows, const PrefixTree& t) {
  std::set<std::vector<int32_t>> prefixes;
  for (size_t r = 0; r < rows.size(); ++r) {
    ASSERT_EQ(t.row_offsets[r + 1] - t.row_offsets[r], static_cast<int64_t>(rows[r].size()));
    for (size_t i = 0; i < rows[r].size(); ++i) {
      const int64_t at = t.index(r, static_cast<int64_t>(i));
      ASSERT_EQ(t.ids[static_cast<size_t>(at)], rows[r][i]) << "row " << r << " token " << i;
      EXPECT_EQ(t.position[static_cast<size_t>(at)], static_cast<int64_t>(i));
      EXPECT_EQ(t.previous[static_cast<size_t>(at)], i == 0 ? -1 : t.index(r, static_cast<int64_t>(i) - 1));
      prefixes.insert(std::vector<int32_t>(rows[r].begin(), rows[r].begin() + static_cast<std::ptrdiff_t>(i) + 1));
      // Visible: the path's segments, the own segment cut at this token.
      std::vector<int64_t> seen;
      for (const int64_t s : t.path(t.segment_of[static_cast<size_t>(at)]))
        for (int64_t k = t.segments[static_cast<size_t>(s)].begin; k < t.segments[static_cast<size_t>(s)].end && k <= at; ++k) seen.push_back(k);
      std::vector<int64_t> want;
      for (size_t j = 0; j <= i; ++j) want.push_back(t.index(r, static_cast<int64_t>(j)));
      EXPECT_EQ(seen, want) << "row " << r << " token " << i;
    }
  }
  EXPECT_EQ(t.tokens(), static_cast<int64_t>(prefixes.size()));
  // Segments tile the packed tokens, parents first.
  int64_t next = 0;
  for (size_t s = 0; s < t.segments.size(); ++s) {
    EXPECT_EQ(t.segments[s].begin, next);
    EXPECT_GT(t.segments[s].end, t.segments[s].begin);
    EXPECT_LT(t.segments[s].parent, static_cast<int64_t>(s));
    next = t.segments[s].end;
  }
  EXPECT_EQ(next, t.tokens());
}

}  // namespace

TEST(PrefixTree, AGroupSharesItsPromptOnce) {
  const Rows rows = {{1, 2, 3, 4, 5, 10, 11}, {1, 2, 3, 4, 5, 20}, {1, 2, 3, 4, 5, 30, 31, 32}};
  const PrefixTree t = PrefixTree::build(rows);
  check_invariants(rows, t);
  EXPECT_EQ(t.tokens(), 5 + 2 + 1 + 3);
  EXPECT_EQ(t.row_tokens(), 7 + 6 + 8);
  ASSERT_EQ(t.segments.size(), 4u);  // the prompt, then one segment a reply
  EXPECT_EQ(t.segments[0].end, 5);
  for (size_t s = 1; s < 4; ++s) EXPECT_EQ(t.segments[s].parent, 0);
}

TEST(PrefixTree, TurnsOfASessionAreOneChain) {
  // Each turn resends the conversation so far and adds to it.
  const Rows rows = {{1, 2, 3}, {1, 2, 3, 4, 5}, {1, 2, 3, 4, 5, 6, 7, 8}};
  const PrefixTree t = PrefixTree::build(rows);
  check_invariants(rows, t);
  EXPECT_EQ(t.tokens(), 8);
  EXPECT_EQ(t.segments.size(), 1u);
}

TEST(PrefixTree, IdenticalRowsShareEveryTokenAndUnrelatedRowsNone) {
  const Rows same = {{7, 8, 9}, {7, 8, 9}};
  const PrefixTree a = PrefixTree::build(same);
  check_invariants(same, a);
  EXPECT_EQ(a.tokens(), 3);
  const Rows apart = {{1, 2}, {3, 4, 5}, {}, {6}};
  const PrefixTree b = PrefixTree::build(apart);
  check_invariants(apart, b);
  EXPECT_EQ(b.tokens(), 6);
  EXPECT_EQ(b.segments.size(), 3u);  // three roots; the empty row takes nothing
}

TEST(PrefixTree, BranchingSessionsOfRandomShapeKeepEveryRowsView) {
  // Sessions that branch (retries, sub-agents) at random points off random
  // earlier rows, over a small vocabulary so unrelated rows collide too.
  std::mt19937 rng(7);
  for (int trial = 0; trial < 50; ++trial) {
    Rows rows;
    const int n = 1 + static_cast<int>(rng() % 12);
    for (int r = 0; r < n; ++r) {
      std::vector<int32_t> row;
      if (!rows.empty() && rng() % 3 != 0) {
        const auto& from = rows[rng() % rows.size()];
        row.assign(from.begin(), from.begin() + static_cast<std::ptrdiff_t>(from.empty() ? 0 : rng() % (from.size() + 1)));
      }
      const int extra = static_cast<int>(rng() % 6);
      for (int k = 0; k < extra; ++k) row.push_back(static_cast<int32_t>(rng() % 4));
      rows.push_back(row);
    }
    const PrefixTree t = PrefixTree::build(rows);
    check_invariants(rows, t);
    if (HasFailure()) {
      ADD_FAILURE() << "trial " << trial;
      return;
    }
  }
}
