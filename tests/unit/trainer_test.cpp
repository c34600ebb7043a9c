// The trainer's pieces without plugins: AReaL's capacity formula and
// packing rows into a batch.
#include <gtest/gtest.h>

#include <thread>
#include <cstdint>
#include <string>
#include <vector>
#include <chrono>
#include <algorithm>

#include "core/plugin_host/error.hpp"
#include "core/trainer/algorithm_loss.hpp"
#include "core/trainer/staleness_manager.hpp"
#include "core/trainer/trajectory_batch.hpp"
#include "core/trainer/training_log.hpp"

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

// A row of `prompt` then `out` sampled at `version`.
TrajectoryRow row(std::vector<int32_t> prompt, std::vector<int32_t> out, int64_t version, double reward) {
  TrajectoryRow r;
  r.input_ids = prompt;
  r.input_ids.insert(r.input_ids.end(), out.begin(), out.end());
  r.loss_mask.assign(prompt.size(), 0);
  r.loss_mask.resize(r.input_ids.size(), 1);
  r.logprobs.assign(r.input_ids.size(), -0.5f);
  r.versions.assign(prompt.size(), -1);
  r.versions.resize(r.input_ids.size(), version);
  r.reward = reward;
  return r;
}

TEST(TrajectoryRows, PackedBatchBoundsGroupsAndScalars) {
  PackedBatch b(4, 0.7f);
  b.add(row({1}, {2, 3}, 4, 1.0), 1);
  b.add(row({5, 6}, {7}, 3, 0.0), 2);
  EXPECT_EQ(b.cu_seqlens.values(), (std::vector<int32_t>{0, 3, 6}));
  EXPECT_EQ(b.input_ids.values(), (std::vector<int32_t>{1, 2, 3, 5, 6, 7}));
  EXPECT_EQ(b.versions.values(), (std::vector<int64_t>{-1, 4, 4, -1, -1, 3}));
  EXPECT_EQ(b.group_ids.values(), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(b.rewards.values(), (std::vector<float>{1.0f, 0.0f}));
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

// The algorithm's step stats over micro-batches: means weighted by loss
// tokens, and a *_max stat the largest (a mean of maxima depended on the
// micro-batch split).
namespace {
int loss_calls = 0;
areal_status* scripted_loss(void*, const areal_tensor_map*, double* out_loss, DLTensor*, const areal_writer* out) {
  *out_loss = 0;
  const std::string stats = ++loss_calls == 1 ? R"({"loss_tokens": 10, "ratio_max": 1.0, "clip_fraction": 0.2})"
                                              : R"({"loss_tokens": 30, "ratio_max": 3.0, "clip_fraction": 0.6})";
  return out->write(out->ctx, areal_str{stats.data(), stats.size()});
}
}  // namespace

TEST(AlgorithmLoss, MeansAreTokenWeightedAndMaximaAreMaxima) {
  areal_algorithm_vtable vt{};
  vt.loss = scripted_loss;
  areal::trainer::AlgorithmLoss loss(&vt, nullptr);
  for (int i = 0; i < 2; ++i) {
    double value = 0;
    ASSERT_EQ(loss.fn()->eval(loss.fn()->ctx, nullptr, &value, nullptr, nullptr), nullptr);
  }
  const auto avg = loss.averages();
  EXPECT_DOUBLE_EQ(avg["ratio_max"].get<double>(), 3.0);
  EXPECT_DOUBLE_EQ(avg["clip_fraction"].get<double>(), (0.2 * 10 + 0.6 * 30) / 40);
  EXPECT_DOUBLE_EQ(loss.sums()["maxima"]["ratio_max"].get<double>(), 3.0);
}
