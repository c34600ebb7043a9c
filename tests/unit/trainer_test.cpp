// The trainer's pieces without plugins: AReaL's capacity formula, episode
// rows (alignment, discount) and packing.
#include <gtest/gtest.h>

#include <thread>

#include "areal/core/error.hpp"
#include "areal/core/trainer/staleness_manager.hpp"
#include "areal/core/trainer/trajectory_batch.hpp"
#include "areal/core/trainer/training_log.hpp"

namespace {

using namespace areal::trainer;

TEST(StalenessManager, SynchronousModeAllowsExactlyOneBatchPerVersion) {
  StalenessManager m(/*batch_size=*/4, /*max_head_offpolicyness=*/0, /*max_concurrent=*/100);
  // (0 + 0 + 1) * 4 - 0 = 4 tasks at version 0.
  EXPECT_EQ(m.capacity(), 4);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(m.acquire());
  EXPECT_EQ(m.capacity(), 0);
  for (int i = 0; i < 4; ++i) m.on_accepted();
  EXPECT_EQ(m.capacity(), 0);  // accepted still count until the version moves
  m.set_version(1);
  EXPECT_EQ(m.capacity(), 4);
}

TEST(StalenessManager, OffPolicynessAndConcurrencyBoundCapacity) {
  StalenessManager m(2, 2, 3);
  // staleness bound (2 + 0 + 1) * 2 = 6, concurrency 3.
  EXPECT_EQ(m.capacity(), 3);
  for (int i = 0; i < 3; ++i) m.acquire();
  EXPECT_EQ(m.capacity(), 0);
  m.on_accepted(), m.on_accepted(), m.on_accepted();
  EXPECT_EQ(m.capacity(), 3);  // min(3 - 0, 6 - 3)
  for (int i = 0; i < 3; ++i) m.acquire();
  m.on_rejected();             // a filtered group frees its slot and does not count
  EXPECT_EQ(m.capacity(), 1);  // min(3 - 2, 6 - (3 + 2))
  m.on_dropped();              // an accepted group dropped as stale frees one more
  EXPECT_EQ(m.capacity(), 1);  // min(1, 6 - (2 + 2))
}

TEST(StalenessManager, RecoveringAVersionCountsConsumedBatches) {
  StalenessManager m(8, 1, 1000);
  m.on_version_recovered(5);
  // Without the fix capacity would be (1 + 5 + 1) * 8 = 56 after a restart.
  EXPECT_EQ(m.capacity(), (1 + 5 + 1) * 8 - 5 * 8);
}

TEST(StalenessManager, StopWakesWaiters) {
  StalenessManager m(1, 0, 1);
  ASSERT_TRUE(m.acquire());
  bool result = true;
  std::thread waiter([&] { result = m.acquire(); });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  m.stop();
  waiter.join();
  EXPECT_FALSE(result);
}

areal::RecordedCompletion completion(std::vector<int32_t> in, std::vector<int32_t> out, std::vector<int64_t> versions,
                                     std::optional<double> reward) {
  areal::RecordedCompletion c;
  c.input_ids = std::move(in);
  c.output_ids = std::move(out);
  for (size_t i = 0; i < c.output_ids.size(); ++i) c.logprobs.push_back(-0.5f - static_cast<float>(i));
  c.versions = std::move(versions);
  c.reward = reward;
  return c;
}

TEST(TrajectoryRows, AlignedTokensAndDiscountedRewards) {
  std::vector<areal::RecordedCompletion> cs = {completion({1, 2}, {3, 4}, {0, 1}, std::nullopt),
                                               completion({1, 2, 3, 4, 5}, {6}, {1}, 2.0)};
  size_t unrewarded = 0;
  const auto rows = rows_from_episode("ep", 7, cs, 0.5, &unrewarded);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(unrewarded, 1u);
  EXPECT_EQ(rows[0].input_ids, (std::vector<int32_t>{1, 2, 3, 4}));
  EXPECT_EQ(rows[0].loss_mask, (std::vector<int32_t>{0, 0, 1, 1}));
  EXPECT_EQ(rows[0].logprobs, (std::vector<float>{0, 0, -0.5f, -1.5f}));
  EXPECT_EQ(rows[0].versions, (std::vector<int64_t>{-1, -1, 0, 1}));  // same positions as the mask
  EXPECT_DOUBLE_EQ(rows[1].reward, 2.0);
  EXPECT_DOUBLE_EQ(rows[0].reward, 1.0);  // 0 + 0.5 * 2
  EXPECT_EQ(rows[0].oldest_version(), 0);
  EXPECT_EQ(rows[1].oldest_version(), 1);
  EXPECT_EQ(rows[0].group_id, 7);
}

TEST(TrajectoryRows, PackedBatchBoundsAndScalars) {
  std::vector<areal::RecordedCompletion> cs = {completion({1}, {2, 3}, {4, 4}, 1.0)};
  auto rows = rows_from_episode("a", 1, cs, 1.0);
  auto more = rows_from_episode("b", 2, {completion({5, 6}, {7}, {3}, 0.0)}, 1.0);
  rows.insert(rows.end(), more.begin(), more.end());
  PackedBatch b(rows, 4, 0.7f);
  EXPECT_EQ(b.cu_seqlens.values(), (std::vector<int32_t>{0, 3, 6}));
  EXPECT_EQ(b.input_ids.values(), (std::vector<int32_t>{1, 2, 3, 5, 6, 7}));
  EXPECT_EQ(b.group_ids.values(), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(b.loss_tokens(), 3u);
  EXPECT_EQ(b.policy_version.value(), 4);
  EXPECT_FLOAT_EQ(b.temperature.value(), 0.7f);
  auto m = b.map();
  EXPECT_EQ(m.get()->count, 9u);  // no prox_logprobs / advantages yet
  b.advantages.values().assign(6, 0.0f);
  EXPECT_EQ(b.map().get()->count, 10u);
}

TEST(TrainingLog, SvgChartHasOnePointPerStep) {
  const std::string svg = svg_line_chart({1, 2, 3}, {0.1, 0.5, 0.9}, "t", "reward");
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  const auto pts = svg.substr(svg.find("points=\""));
  EXPECT_EQ(std::count(pts.begin(), pts.begin() + pts.find("\"/>"), ','), 3);
}

}  // namespace
