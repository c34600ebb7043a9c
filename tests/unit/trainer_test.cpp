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
#include "core/trainer/optimizer_step.hpp"
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

// PPO minibatches (trainer.ppo_n_minibatches): advantages over the whole
// batch once, then one train_step per minibatch of whole rows that together
// are the batch, each with its share of the advantages; the train plugin's
// stats joined (counts added, counters the last, means token-weighted).
namespace {

struct StepLog {
  std::vector<size_t> advantage_rows;                  // rows seen by compute_advantages, per call
  std::vector<std::vector<int32_t>> step_ids;          // input_ids per train_step
  std::vector<std::vector<float>> step_advantages;     // advantages per train_step
  std::vector<std::vector<int32_t>> step_cu;           // cu_seqlens per train_step
} step_log;

const DLTensor* tensor_named(const areal_tensor_map* m, const std::string& name) {
  for (size_t i = 0; i < m->count; ++i)
    if (std::string(m->names[i].data, m->names[i].size) == name) return m->tensors[i];
  return nullptr;
}

template <class T>
std::vector<T> values_in(const areal_tensor_map* m, const std::string& name) {
  const DLTensor* t = tensor_named(m, name);
  if (t == nullptr) return {};
  const T* p = reinterpret_cast<const T*>(static_cast<const char*>(t->data) + t->byte_offset);
  return std::vector<T>(p, p + t->shape[0]);
}

// Advantage of token t: its position in the whole batch (so a minibatch
// shows which share of the batch's advantages it got).
areal_status* positional_advantages(void*, const areal_tensor_map* batch, const areal_tensor_map* out) {
  step_log.advantage_rows.push_back(values_in<float>(batch, "rewards").size());
  const DLTensor* adv = tensor_named(out, "advantages");
  float* a = static_cast<float*>(adv->data);
  for (int64_t t = 0; t < adv->shape[0]; ++t) a[t] = static_cast<float>(t);
  return nullptr;
}

int steps_taken = 0;
areal_status* recording_train_step(void*, const areal_tensor_map* batch, const areal_loss_fn*, const areal_writer* out) {
  step_log.step_ids.push_back(values_in<int32_t>(batch, "input_ids"));
  step_log.step_advantages.push_back(values_in<float>(batch, "advantages"));
  step_log.step_cu.push_back(values_in<int32_t>(batch, "cu_seqlens"));
  int loss_tokens = 0;
  for (int32_t m : values_in<int32_t>(batch, "loss_mask")) loss_tokens += m != 0;
  ++steps_taken;
  const std::string stats = "{\"loss_tokens\": " + std::to_string(loss_tokens) + ", \"tokens\": " +
                            std::to_string(step_log.step_ids.back().size()) + ", \"grad_norm\": " + std::to_string(steps_taken) +
                            ", \"step\": " + std::to_string(steps_taken) + ", \"device\": \"cpu\", \"peak_device_memory_bytes\": " +
                            std::to_string(100 * (steps_taken % 2 + 1)) + "}";
  return out->write(out->ctx, areal_str{stats.data(), stats.size()});
}

// The recording train and algorithm plugins above, with a fresh log.
struct RecordingPlugins {
  areal_train_vtable train{};
  areal_algorithm_vtable algo{};
  StepPlugins plugins;
  RecordingPlugins() {
    train.train_step = recording_train_step;
    algo.compute_advantages = positional_advantages;
    plugins.train = &train, plugins.algorithm = &algo;
    step_log = StepLog{}, steps_taken = 0;
  }
};

}  // namespace

TEST(OptimizerStep, MinibatchesPartitionTheBatchAfterWholeBatchAdvantages) {
  for (const int64_t minibatches : {int64_t{1}, int64_t{3}, int64_t{10}}) {
    RecordingPlugins recording;
    const StepPlugins& plugins = recording.plugins;
    PackedBatch b(2, 1.0f);
    // Two groups of three rows: 1 + 2, 1 + 3, 1 + 2 and 4 + 2, 4 + 1, 4 + 2 tokens.
    for (int i = 0; i < 3; ++i) b.add(row({1}, std::vector<int32_t>(i == 1 ? 3 : 2, 10 + i), 2, 1.0), 1);
    for (int i = 0; i < 3; ++i) b.add(row({4, 4, 4, 4}, std::vector<int32_t>(i == 1 ? 1 : 2, 20 + i), 2, 0.0), 2);
    const auto stats = optimizer_step(plugins, b, StepOptions{1.0f, false, minibatches, 1, 0});
    const size_t expected = static_cast<size_t>(std::min<int64_t>(minibatches, 6));  // never more minibatches than rows
    ASSERT_EQ(step_log.step_ids.size(), expected) << minibatches;
    EXPECT_EQ(step_log.advantage_rows, (std::vector<size_t>{6}));  // once, over the whole batch
    std::vector<int32_t> ids;
    std::vector<float> adv;
    for (size_t s = 0; s < expected; ++s) {
      ids.insert(ids.end(), step_log.step_ids[s].begin(), step_log.step_ids[s].end());
      adv.insert(adv.end(), step_log.step_advantages[s].begin(), step_log.step_advantages[s].end());
      EXPECT_EQ(step_log.step_cu[s].front(), 0);  // rebased
      EXPECT_EQ(static_cast<size_t>(step_log.step_cu[s].back()), step_log.step_ids[s].size());
    }
    EXPECT_EQ(ids, b.input_ids.values());  // the minibatches are the batch, in order
    ASSERT_EQ(adv.size(), b.tokens());
    for (size_t t = 0; t < adv.size(); ++t) EXPECT_FLOAT_EQ(adv[t], static_cast<float>(t));
    EXPECT_EQ(stats["tokens"].get<double>(), static_cast<double>(b.tokens()));
    EXPECT_EQ(stats["loss_tokens"].get<double>(), static_cast<double>(b.loss_tokens()));
    EXPECT_EQ(stats["step"].get<double>(), static_cast<double>(expected));  // the plugin's update count (the loop's own "step" wins in metrics.jsonl)
    EXPECT_EQ(stats["device"], "cpu");
    EXPECT_EQ(stats.value("minibatches", int64_t{1}), static_cast<int64_t>(expected));
    EXPECT_EQ(stats["peak_device_memory_bytes"].get<double>(), 200.0);  // 200, 100, 200, ...: a maximum, not a mean
    if (minibatches == 3) {
      // Balanced by tokens (27: targets 9 and 18) and cut where rows share
      // no prefix: group 1's three rows (10 tokens), then group 2's in two.
      std::vector<size_t> rows;
      for (const auto& cu : step_log.step_cu) rows.push_back(cu.size() - 1);
      EXPECT_EQ(rows, (std::vector<size_t>{3, 1, 2}));
    }
  }
}

// With data-parallel train ranks every minibatch needs a row per rank: a
// long row must not leave a minibatch short (the ranks' split would fail
// mid-step, after earlier minibatches' updates), and fewer minibatches are
// made when the batch cannot give each its rows.
TEST(OptimizerStep, EveryMinibatchHasARowPerRank) {
  // Rows of 40, 2, 2, 2, 2, 2 tokens: balanced by tokens alone, the first minibatch would be the long row alone.
  const std::vector<int64_t> cu = {0, 40, 42, 44, 46, 48, 50};
  for (const auto& s : plan_slices(cu, 2, {}, "PPO minibatches", 2)) EXPECT_GE(s.end_sequence - s.first_sequence, 2);
  EXPECT_EQ(plan_slices(cu, 2, {}, "PPO minibatches", 2)[0].end_sequence, 2);
  EXPECT_THROW(plan_slices(cu, 4, {}, "PPO minibatches", 2), areal::Error);  // 6 rows cannot give 4 x 2
  RecordingPlugins recording;
  const StepPlugins& plugins = recording.plugins;
  PackedBatch b(2, 1.0f);
  for (int i = 0; i < 6; ++i) b.add(row({1, 2}, {3}, 2, 1.0), i);
  optimizer_step(plugins, b, StepOptions{1.0f, false, 4, 2, 0});
  ASSERT_EQ(step_log.step_cu.size(), 3u);  // 4 asked, 6 rows / 2 ranks
  for (const auto& c : step_log.step_cu) EXPECT_EQ(c.size() - 1, 2u);
}

TEST(OptimizerStep, MinibatchStatsJoin) {
  const nlohmann::json a = {{"loss_tokens", 10}, {"grad_norm", 1.0}, {"step", 5}, {"tokens", 12}, {"ratio_max", 2.0}, {"lr", 1e-5}};
  const nlohmann::json b = {{"loss_tokens", 30}, {"grad_norm", 3.0}, {"step", 6}, {"tokens", 40}, {"ratio_max", 1.5}, {"lr", 2e-5}};
  const auto j = join_minibatch_stats({a, b});
  EXPECT_DOUBLE_EQ(j["grad_norm"].get<double>(), (1.0 * 10 + 3.0 * 30) / 40);
  EXPECT_DOUBLE_EQ(j["loss_tokens"].get<double>(), 40);
  EXPECT_DOUBLE_EQ(j["tokens"].get<double>(), 52);
  EXPECT_DOUBLE_EQ(j["step"].get<double>(), 6);
  EXPECT_DOUBLE_EQ(j["lr"].get<double>(), 2e-5);
  EXPECT_DOUBLE_EQ(j["ratio_max"].get<double>(), 2.0);
  EXPECT_EQ(join_minibatch_stats({a}), a);
  // A skipped update's null grad_norm stays visible in the step's row.
  const nlohmann::json skipped = {{"loss_tokens", 5}, {"grad_norm", nullptr}, {"update_skipped", 1}};
  EXPECT_TRUE(join_minibatch_stats({a, skipped, b})["grad_norm"].is_null());
}
