// The local engine's prefix-cache bookkeeping (issue #36,
// plugins/inference_local/slot_contents.*): which slot holds a prompt's
// longest prefix, and when rows stop counting (another adapter, new
// weights, an adapter replaced while a request ran).
#include <memory>
#include <vector>
#include <cstdint>

#include <gtest/gtest.h>

#include "plugins/inference_local/slot_contents.hpp"

using areal::local_inference::SlotContents;

TEST(SlotContents, LongestPrefixAmongSlotsOfTheSameAdapterAndWeights) {
  SlotContents c(4);
  const std::vector<int32_t> a = {1, 2, 3, 4, 5}, b = {1, 2, 9};
  const auto adapter = std::make_shared<int>(7);
  c.assign(2, a, 5, nullptr);
  c.assign(3, b, 3, adapter);
  const auto m = c.longest_prefix({1, 2, 3, 4, 5, 6}, nullptr);
  EXPECT_EQ(m.slot, 2);
  EXPECT_EQ(m.tokens, 5);
  // At most all but the last prompt token: its logits give the first sampled token.
  EXPECT_EQ(c.longest_prefix({1, 2, 3, 4, 5}, nullptr).tokens, 4);
  // Another adapter's rows do not count, and the same adapter's do.
  EXPECT_EQ(c.longest_prefix({1, 2, 9, 9}, adapter.get()).slot, 3);
  EXPECT_EQ(c.longest_prefix({1, 2, 9, 9}, nullptr).tokens, 2);
  // New weights: nothing counts until slots are assigned again.
  c.invalidate();
  EXPECT_EQ(c.longest_prefix({1, 2, 3, 4, 5, 6}, nullptr).tokens, 0);
  c.assign(1, a, 3, nullptr);
  EXPECT_EQ(c.longest_prefix({1, 2, 3, 4, 5, 6}, nullptr).slot, 1);
}

TEST(SlotContents, RowsOfAnAdapterReplacedMidRequestAreForgotten) {
  SlotContents c(2);
  const auto first = std::make_shared<int>(1), second = std::make_shared<int>(2);
  c.assign(0, {4, 5, 6}, 3, first);
  c.append(0, 7, first.get());
  EXPECT_EQ(c.longest_prefix({4, 5, 6, 7, 8}, first.get()).tokens, 4);
  c.append(0, 8, second.get());  // the request's adapter was replaced
  EXPECT_EQ(c.longest_prefix({4, 5, 6, 7, 8, 9}, first.get()).tokens, 0);
  EXPECT_EQ(c.longest_prefix({4, 5, 6, 7, 8, 9}, second.get()).tokens, 0);
}

TEST(SlotContents, PicksTheLowestEmptySlotThenTheLeastRecentlyReleased) {
  SlotContents c(4);
  c.assign(1, {1, 2}, 2, nullptr);
  c.assign(3, {3, 4}, 2, nullptr);
  c.release(3);
  c.release(1);
  EXPECT_EQ(c.pick({3, 2, 1, 0}), 0);  // empty and lowest
  EXPECT_EQ(c.pick({3, 2, 1}), 2);
  EXPECT_EQ(c.pick({3, 1}), 3);  // both hold rows: the one released first
  c.clear();
  EXPECT_EQ(c.pick({3, 1}), 1);
}

// A replaced adapter (a new version every training step) is not kept alive
// by the slots that held its rows: its device memory goes once no step uses
// it, its rows then count for nothing, and such a slot ranks as empty.
TEST(SlotContents, AFreedAdapterIsNotKeptAliveAndItsRowsStopCounting) {
  SlotContents c(2);
  auto old_version = std::make_shared<int>(1);
  const std::weak_ptr<int> watch = old_version;
  const void* key = old_version.get();
  c.assign(0, {4, 5, 6}, 3, old_version);
  c.release(0);
  c.assign(1, {7, 8}, 2, nullptr);
  c.release(1);
  EXPECT_EQ(c.longest_prefix({4, 5, 6, 7}, key).tokens, 3);
  old_version.reset();  // the registry replaced it and no step uses it
  EXPECT_TRUE(watch.expired()) << "the prefix cache kept a replaced adapter alive";
  EXPECT_EQ(c.longest_prefix({4, 5, 6, 7}, key).tokens, 0);  // even if a new adapter lands at its address
  EXPECT_EQ(c.pick({0, 1}), 0);  // holds nothing usable: taken before the slot with the base model's rows
}
