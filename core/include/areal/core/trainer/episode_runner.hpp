// Runs one workflow episode through the ABI and keeps everything it
// produced, failed episodes included: the rollout job and the trainer both
// write every outcome to rollouts.jsonl, so nothing is dropped silently.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "areal/core/episode_recorder.hpp"
#include "areal/plugin_api.h"

namespace areal::trainer {

struct EpisodeTarget {
  const areal_workflow_vtable* workflow = nullptr;
  void* workflow_self = nullptr;
  const areal_inference_vtable* inference = nullptr;
  void* inference_self = nullptr;
  std::string base_url;  // the gateway's OpenAI base URL, or empty
};

struct EpisodeOutcome {
  bool ok = false;
  std::string error;                          // why it failed (ok == false)
  nlohmann::json record;                      // {"episode_id", "completions", "result"?, "status", "error"?}
  std::vector<RecordedCompletion> completions;  // token-level, rewards applied
};

// Never throws for workflow failures (they become ok == false with the
// reason); whatever was generated before a failure is kept in the record.
EpisodeOutcome run_episode(const EpisodeTarget& target, const std::string& episode_id, const std::string& data_json,
                           uint64_t seed);

}  // namespace areal::trainer
