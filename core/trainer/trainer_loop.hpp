// The RL trainer loop (AReaL's PPOTrainer.train, in C++ over the plugin ABI):
//
//   take a batch of groups from the asynchronous rollout
//   -> (recompute proximal log-probs) -> advantages (algorithm plugin)
//   -> one optimizer update per PPO minibatch (train plugin, loss from the
//      algorithm plugin)
//   -> pause rollout and inference -> weights to the inference backend (in
//      memory, or through HF files on disk)
//   -> version + 1 everywhere -> resume
//   -> metrics row, progress line, checkpoint when due.
//
// Nothing here links libtorch: tensors cross as DLPack host tensors.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/trainer/optimizer_step.hpp"
#include "core/trainer/rollout_controller.hpp"
#include "areal/plugin_api.h"

namespace areal::trainer {

struct TrainerOptions {
  int64_t total_steps = 1;
  float temperature = 1.0f;         // log-probs of logits / temperature (match the sampling temperature)
  bool recompute_logprob = false;   // proximal log-probs from the train plugin before each step
  int64_t ppo_n_minibatches = 1;    // optimizer updates per step, each on a share of the batch's rows
  int64_t train_world_size = 1;     // data-parallel train ranks: each minibatch needs a row per rank
  std::string run_dir;              // output_dir/name/trial
  int64_t checkpoint_every = 0;     // steps; 0 = only the final one
  bool resume = false;              // continue from the newest checkpoint under run_dir
  bool save_final = true;           // HF model folder at run_dir/final
  // "memory": train.export_weights -> inference.update_weights_from_tensors
  // (ABI 1.1, both in this process); "disk": save HF files, inference
  // reloads; "auto": memory when both plugins can, else disk.
  std::string weight_update = "auto";
  // With LoRA adapter hand-offs: the name the engine serves the policy as.
  std::string policy_adapter = "policy";
  // The engine serves other jobs too (the managed service): the policy is a
  // named adapter, never the default one; the engine's version and pause
  // state are left alone. Needs adapter hand-offs.
  bool shared_engine = false;
  // (optional) Asked before every step: a non-empty reason ends the run
  // there (areal::Error CANCELLED; checkpoints written so far stay).
  std::function<std::string()> stop_requested;
  // (optional) Called after every step with (steps done, the version now
  // served, whether it was the last); returns rows for metrics.jsonl
  // (evaluation results). It may block only on the last call.
  std::function<std::vector<nlohmann::json>(int64_t, int64_t, bool)> after_step;
};

// The step's plugins (train, algorithm, optional ref) and the inference
// backend that serves the weights.
struct TrainerParts : StepPlugins {
  const areal_inference_vtable* inference = nullptr;
  void* inference_self = nullptr;
};

struct TrainSummary {
  int64_t steps_run = 0, final_version = 0;
  double seconds = 0;
  std::vector<double> step_rewards;  // each step's mean reward, in order
  std::vector<nlohmann::json> evaluations;  // after_step's rows, in order

  // Mean reward over the first / last `window` steps run (fewer if fewer ran):
  // one step's batch is too noisy to say whether anything was learned.
  double first_mean(size_t window) const;
  double last_mean(size_t window) const;
};

// Runs the loop. Throws areal::Error for a plugin failure or a missing
// checkpoint to resume from (after stopping the rollout cleanly).
TrainSummary run_trainer(const TrainerOptions& options, const TrainerParts& parts, RolloutOptions rollout,
                         const EpisodeTarget& target);

}  // namespace areal::trainer
