// How many rollouts may start now without any trained sample being staler
// than max_head_offpolicyness versions (AReaL's StalenessManager formula):
//
//   capacity = min(max_concurrent - running,
//                  (max_head_offpolicyness + version + 1) * batch_size
//                    - (accepted + running))
//
// Units are rollout tasks (one task = one group of n_samples episodes), and
// batch_size is the number of tasks the trainer consumes per step. With
// max_head_offpolicyness 0 the loop is synchronous: each version generates
// exactly one batch. Thread-safe.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>

namespace areal::trainer {

struct StalenessCounters {
  int64_t version = 0, running = 0, accepted = 0, rejected = 0;
};

class StalenessManager {
 public:
  StalenessManager(int64_t batch_size, int64_t max_head_offpolicyness, int64_t max_concurrent);

  int64_t capacity() const;
  // Blocks until capacity > 0 (then counts one more running task) or until
  // stop() is called (returns false).
  bool acquire();
  void release();      // gives back a slot from acquire() that started nothing
  void on_accepted();  // a running task finished and its group will be trained
  void on_rejected();  // a running task finished but its group was filtered out or failed
  // A group accepted earlier was dropped before training (too stale): it no
  // longer counts as accepted, so a replacement may start.
  void on_dropped();
  void set_version(int64_t version);
  // After resuming at `version`, the batches consumed so far count as
  // accepted (fix for AReaL issue #1388: otherwise capacity jumps after a
  // restart and the first batches come out far staler than allowed).
  void on_version_recovered(int64_t version);
  void stop();
  StalenessCounters counters() const;

 private:
  int64_t capacity_locked() const;

  const int64_t batch_size_, max_offpolicy_, max_concurrent_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  StalenessCounters c_;
  bool stopped_ = false;
};

}  // namespace areal::trainer
