// The rollout-only job: workflow episodes over a dataset with bounded
// concurrency, run by the trainer's rollout loop (RolloutController, one
// episode per task, ids t<N>-e0), one JSONL record per episode. Every
// episode produces a record, failed ones included (status "error" with the
// reason), so nothing is dropped silently.
#pragma once

#include <string>
#include <vector>
#include <cstdint>

#include <nlohmann/json.hpp>

#include "core/plugin_host/gateway_sessions.hpp"
#include "areal/plugin_api.h"

namespace areal::host {

struct RolloutPlan {
  std::vector<nlohmann::json> dataset;  // one object per item
  size_t episodes = 0;                  // total; items in a seeded shuffle per pass
  size_t concurrency = 4;
  uint64_t seed = 1;
  std::string output_path;
  std::string base_url;                 // gateway URL, or empty
  GatewaySessions* sessions = nullptr;  // when set: a gateway session per episode
};

struct RolloutSummary {
  size_t ok = 0;
  size_t failed = 0;
  size_t rewarded = 0;  // completions with a reward
  double reward_sum = 0;
  size_t tokens = 0;
  double seconds = 0;
  double mean_reward() const { return rewarded ? reward_sum / rewarded : 0.0; }
};

// Reads a JSONL dataset; throws areal::Error naming file and line for a
// line that is not a JSON object.
std::vector<nlohmann::json> read_dataset(const std::string& path);

RolloutSummary run_rollout(const RolloutPlan& plan, const areal_workflow_vtable& workflow, void* workflow_self,
                           const areal_inference_vtable& inference, void* inference_self);

}  // namespace areal::host
