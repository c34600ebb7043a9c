// The host side of one workflow episode: implements areal_episode_api over
// an inference instance and records every api->generate call in a Recorder
// (one linear conversation, in call order). The workflow never holds the
// only copy of what was sampled, so nothing it does can lose or alter it.
// api->chat goes to the episode's gateway session, recorded there.
#pragma once

#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <vector>
#include <cstdint>

#include <nlohmann/json.hpp>

#include "core/plugin_host/gateway_sessions.hpp"
#include "core/recorder/recorder.hpp"
#include "areal/plugin_api.h"

namespace areal {

class EpisodeRecorder {
 public:
  // With record_routing, generate asks the backend for MoE routing (ABI 1.7)
  // and keeps it with the call.
  EpisodeRecorder(std::string episode_id, const areal_inference_vtable* vtable, void* inference_self, uint64_t seed_base,
                  bool record_routing = false);
  EpisodeRecorder(const EpisodeRecorder&) = delete;
  EpisodeRecorder& operator=(const EpisodeRecorder&) = delete;

  const areal_episode_api* api() const { return &api_; }

  // Routes the episode's chat slot to this gateway session (in process).
  // Without it chat is UNSUPPORTED.
  void attach_session(const GatewaySessions* gateway, std::string session_id);

  // Applies a workflow result object: {"reward": x} sets the last
  // completion's reward and returns x. `other_calls`: the episode also made
  // calls elsewhere (its gateway session), so a reward without a completion
  // here is fine. Throws INVALID_ARGUMENT for a malformed result,
  // FAILED_PRECONDITION for a reward with no call at all.
  std::optional<double> apply_result(const nlohmann::json& result, bool other_calls = false);

  // The episode record: {"episode_id", "completions":[{id, input_ids,
  // output_ids, logprobs, versions, finish_reason, reward}]}.
  nlohmann::json to_json() const;
  const recorder::Recorder& record() const { return record_; }

 private:
  static areal_status* generate(void* ctx, const areal_gen_request* request, const areal_completion** out);
  static areal_status* set_reward(void* ctx, areal_str completion_id, double reward);
  static areal_status* chat(void* ctx, areal_str request_json, const areal_writer* out);

  std::string episode_id_;
  const areal_inference_vtable* vtable_;
  void* inference_self_;
  uint64_t seed_base_;
  bool record_routing_;
  areal_episode_api api_{};
  const GatewaySessions* gateway_ = nullptr;
  std::string session_id_;
  recorder::Recorder record_;
  std::mutex views_mutex_;
  std::deque<areal_completion> views_;  // what workflows see; points into record_'s stored calls
};

}  // namespace areal
