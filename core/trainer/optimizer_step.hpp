// One training step over a packed batch, shared by the RL loop and the SFT
// loop: (proximal and reference log-probs) -> advantages (algorithm plugin)
// -> train_step with the algorithm's loss (train plugin), once per PPO
// minibatch (AReaL's ppo_n_minibatches: one optimizer update each).
#pragma once

#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

#include "areal/plugin_api.h"
#include "core/trainer/trajectory_batch.hpp"

namespace areal::trainer {

struct StepPlugins {
  const areal_train_vtable* train = nullptr;
  void* train_self = nullptr;
  const areal_algorithm_vtable* algorithm = nullptr;
  void* algorithm_self = nullptr;
  const areal_train_vtable* ref = nullptr;  // (optional) frozen reference model
  void* ref_self = nullptr;
};

struct StepOptions {
  float temperature = 1.0f;        // log-probs of logits / temperature
  bool recompute_logprob = false;  // proximal log-probs from the train plugin first
  // The batch's rows cut into this many minibatches (whole sequences,
  // balanced by tokens; fewer when the batch has fewer rows), one
  // train_step each. Log-probs and advantages are computed once, over the
  // whole batch, before the first: later minibatches see the policy move
  // away from the proximal one, which is what the clipped loss bounds.
  int64_t minibatches = 1;
  // Rows every minibatch needs (the train plugin's data-parallel ranks each
  // take one at least): fewer minibatches when the batch cannot give them.
  int64_t rows_per_minibatch = 1;
  // The optimizer updates the run plans in all (0: unknown), handed to the
  // train plugin as the batch's "total_updates" (the length of its LR schedule).
  int64_t total_updates = 0;
};

// Returns the train plugin's stats (joined over minibatches) and the
// algorithm's, averaged over the batch's loss tokens ("algo_" keys).
// Throws areal::Error for a plugin failure.
nlohmann::json optimizer_step(const StepPlugins& plugins, PackedBatch& batch, const StepOptions& options);

// The train plugin's stats of a step's minibatches as one row: counts
// (tokens, loss_tokens, computed_tokens, micro_batches, update_skipped) add
// up; *_max and peak_* keys are maxima; counters and settings that carry
// over from one update to the next (step, skipped_updates, lr, world_size,
// resident_state_bytes) are the last minibatch's; other numbers are means
// weighted by each minibatch's loss_tokens (plain means without). A value
// that is not a number in any minibatch (text; grad_norm null when an
// update was skipped) is kept: the last such.
nlohmann::json join_minibatch_stats(const std::vector<nlohmann::json>& parts);

}  // namespace areal::trainer
