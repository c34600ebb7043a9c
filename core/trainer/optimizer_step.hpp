// One optimizer step over a packed batch, shared by the RL loop and the SFT
// loop: (proximal and reference log-probs) -> advantages (algorithm plugin)
// -> train_step with the algorithm's loss (train plugin).
#pragma once

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

// Returns the train plugin's stats and the algorithm's, averaged over the
// batch's loss tokens ("algo_" keys). Throws areal::Error for a plugin failure.
nlohmann::json optimizer_step(const StepPlugins& plugins, PackedBatch& batch, float temperature, bool recompute_logprob);

}  // namespace areal::trainer
