// The one rollout loop, for the trainer and for rollout-only jobs: worker
// threads start rollout tasks
// whenever the StalenessManager has capacity, each task running the
// n_samples episodes of one dataset item concurrently (one GRPO group),
// and finished groups queue up for the trainer in completion order.
//
// Every episode, failed or filtered, is appended to the rollout records
// (JSONL); counters say what happened to each group. The trainer takes
// groups with take(), which also drops any group that became staler than
// max_head_offpolicyness while it waited, so that bound holds by
// construction rather than by timing.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <fstream>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/trainer/episode_runner.hpp"
#include "core/trainer/staleness_manager.hpp"
#include "core/trainer/trajectory_batch.hpp"

namespace areal::trainer {

enum class DynamicFilter { kNone, kMixedRewards };

struct RolloutOptions {
  std::vector<nlohmann::json> dataset;
  size_t n_samples = 1;               // episodes per group
  size_t batch_size = 1;              // groups per train step
  int64_t max_head_offpolicyness = 0; // 0 = synchronous
  size_t max_concurrent = 0;          // groups in flight; 0 = batch_size
  uint64_t seed = 1;
  DynamicFilter filter = DynamicFilter::kNone;
  std::string records_path;           // rollouts.jsonl (appended)
  int64_t first_task = 0;             // task index to start from (resume)
  // Rollout-only jobs: stop after this many tasks (-1: until stopped), and
  // keep no groups (the records hold everything; nobody takes them).
  int64_t max_tasks = -1;
  bool keep_groups = true;
  // Online mode: no workflow; each task grants the gateway one session of
  // capacity and trains whichever session ends next (agents drive it).
  bool online = false;
  GatewaySessions* gateway = nullptr;  // required online
  // Called while the trainer waits; a non-empty answer aborts the run with
  // it (online mode: the agent process died).
  std::function<std::string()> watchdog;
  // Inline groups: take() fails with the last episode's error once this
  // many groups in a row ended without one successful episode (0: never).
  int64_t max_failed_groups_in_a_row = 0;
};

struct RolloutGroup {
  int64_t task = 0;        // global task index
  int64_t group_id = 0;    // the algorithm's group: the task, or online the agent's group_id
  std::string session_id;  // online: the gateway session it came from
  size_t data_index = 0;
  std::vector<TrajectoryRow> rows;
  std::vector<double> episode_rewards;  // the last completion's reward, per ok episode
  size_t failed_episodes = 0;
  size_t unrewarded = 0;
  int64_t oldest_version() const;
  int64_t newest_version() const;
};

struct RolloutStats {
  int64_t tasks_started = 0, tasks_finished = 0;
  int64_t groups_accepted = 0, groups_filtered = 0, groups_failed = 0, groups_dropped_stale = 0;
  int64_t episodes_ok = 0, episodes_failed = 0;
  int64_t rewards = 0, sampled_tokens = 0;  // rewards set and tokens sampled, over every episode
  double reward_sum = 0;
};

class RolloutController {
 public:
  RolloutController(RolloutOptions options, EpisodeTarget target);
  ~RolloutController();
  RolloutController(const RolloutController&) = delete;
  RolloutController& operator=(const RolloutController&) = delete;

  void start();
  // The next `n` accepted groups in completion order, none staler than the
  // bound at the current version. Blocks; throws areal::Error if stopped,
  // if the watchdog reports a problem, or if too many groups failed in a row.
  std::vector<RolloutGroup> take(size_t n);
  // New tasks wait while paused; running ones continue.
  void pause();
  void resume();
  void set_version(int64_t version);
  void on_version_recovered(int64_t version);
  // Stops starting tasks and waits for the running ones to finish.
  void stop();
  // With max_tasks: blocks until every task has finished (true), or until
  // `timeout` (false).
  bool wait_finished(std::chrono::milliseconds timeout);

  // The index of the first task whose group has not been handed out yet:
  // where a resumed run starts so that no dataset item is skipped.
  int64_t next_untrained_task() const;
  // Online mode, exactly once across restarts: marks the gateway sessions
  // settled since the last call (handed to the trainer, or dropped as
  // stale, filtered or empty) as trained for checkpoint `step`. Returns
  // false, keeping them for the next call, when the gateway could not
  // record that (the checkpoint must then not be written).
  bool mark_settled_sessions(int64_t step);
  // The checkpoint `step` is written (or resumed from): the gateway forgets
  // the sessions marked for it and hands out again those marked for later.
  void commit_checkpoint(int64_t step);
  RolloutStats stats() const;
  StalenessCounters staleness() const { return staleness_.counters(); }

 private:
  void worker();
  RolloutGroup run_group(int64_t task);
  RolloutGroup run_online_task(int64_t task);
  void record(nlohmann::json record);
  size_t data_index_of(int64_t task) const;

  const RolloutOptions opt_;
  const EpisodeTarget target_;
  StalenessManager staleness_;
  std::vector<std::thread> threads_;
  int64_t version_ = 0;

  mutable std::mutex mutex_;  // guards everything below
  std::condition_variable ready_changed_, pause_changed_, finished_changed_;
  std::deque<RolloutGroup> ready_;
  std::set<int64_t> handed_out_;  // tasks given to the trainer above the watermark
  std::vector<std::string> settled_sessions_;  // online: not yet marked trained at the gateway
  int64_t next_task_ = 0;            // the next task a worker starts
  int64_t untrained_watermark_ = 0;  // every task below was handed out
  bool paused_ = false, stopped_ = false;
  RolloutStats stats_;
  int64_t failed_in_a_row_ = 0;
  std::string last_failure_;  // the newest failed episode's error, for take()'s message
  std::ofstream records_;
};

}  // namespace areal::trainer
