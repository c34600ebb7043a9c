// Runs one workflow episode through the ABI and keeps everything it
// produced, failed episodes included: the rollout job and the trainer both
// write every outcome to rollouts.jsonl, so nothing is dropped silently.
//
// With a gateway that has session slots, each episode gets its own gateway
// session: episode.api_key is its key (for HTTP agents, e.g. the agent_pool
// workflow) and episode.api->chat goes to it in process. After the episode
// the host ends and exports the session, so the trajectory holds the
// token-level calls made both ways: api->generate (the episode's recorder)
// and the session (the gateway's recorder), as rows of one type.
#pragma once

#include <string>
#include <vector>
#include <cstdint>

#include <nlohmann/json.hpp>

#include "core/plugin_host/gateway_sessions.hpp"
#include "core/recorder/trajectory.hpp"
#include "areal/plugin_api.h"

namespace areal::trainer {

struct EpisodeTarget {
  const areal_workflow_vtable* workflow = nullptr;
  void* workflow_self = nullptr;
  const areal_inference_vtable* inference = nullptr;
  void* inference_self = nullptr;
  std::string base_url;               // the gateway's OpenAI base URL, or empty
  GatewaySessions* gateway = nullptr; // when set: a gateway session per episode
  double turn_discount = 1.0;         // rewards flow back along the episode's calls
  bool record_routing = false;        // api->generate calls record MoE routing (rollout.record_routing)
};

struct EpisodeOutcome {
  bool ok = false;
  std::string error;                         // why it failed (ok == false)
  nlohmann::json record;                     // {"episode_id", "completions", "session"?, "result"?, "status", "error"?}
  std::vector<recorder::TrajectoryRow> rows; // api->generate calls, then the session's; rewards discounted
  std::vector<double> rewards;               // every reward set, in call order (the session's last row's too)
  size_t unrewarded = 0;                     // api->generate calls without a reward
};

// Never throws for workflow failures (they become ok == false with the
// reason); whatever was generated before a failure is kept in the record.
// `group_id` names the episode's GRPO group in its gateway session.
EpisodeOutcome run_episode(const EpisodeTarget& target, const std::string& episode_id, const std::string& data_json,
                           uint64_t seed, const std::string& group_id = "");

}  // namespace areal::trainer
