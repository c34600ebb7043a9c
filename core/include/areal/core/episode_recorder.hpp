// The host side of one workflow episode: implements areal_episode_api over
// an inference instance and keeps the token-level record of every
// completion and reward. The workflow never holds the only copy of what was
// sampled, so nothing it does can lose or alter it.
#pragma once

#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "areal/plugin_api.h"

namespace areal {

struct RecordedCompletion {
  std::string id;
  std::vector<int32_t> input_ids;
  std::vector<int32_t> output_ids;
  std::vector<float> logprobs;
  std::vector<int64_t> versions;
  int32_t finish_reason = 0;
  std::optional<double> reward;
  areal_completion view{};  // what the workflow sees; points into the vectors above
};

class EpisodeRecorder {
 public:
  EpisodeRecorder(std::string episode_id, const areal_inference_vtable* vtable, void* inference_self,
                  uint64_t seed_base);
  EpisodeRecorder(const EpisodeRecorder&) = delete;
  EpisodeRecorder& operator=(const EpisodeRecorder&) = delete;

  const areal_episode_api* api() const { return &api_; }

  // Routes the episode's chat slot to this gateway session (in process,
  // through the gateway's control slot). Without it chat is UNSUPPORTED.
  void attach_session(const areal_gateway_vtable* gateway, void* gateway_self, std::string session_id);

  // Applies a workflow result object: {"reward": x} sets the last
  // completion's reward and returns x. `other_calls`: the episode also made
  // calls elsewhere (its gateway session), so a reward without a completion
  // here is fine. Throws INVALID_ARGUMENT for a malformed result,
  // FAILED_PRECONDITION for a reward with no call at all.
  std::optional<double> apply_result(const nlohmann::json& result, bool other_calls = false);

  // The episode record: {"episode_id", "completions":[{id, input_ids,
  // output_ids, logprobs, versions, finish_reason, reward}]}.
  nlohmann::json to_json() const;
  size_t completion_count() const;
  // A copy of the completions so far (their `view` fields are cleared).
  std::vector<RecordedCompletion> completions() const;
  std::vector<double> rewards() const;  // rewards that were set, in order

 private:
  static areal_status* generate(void* ctx, const areal_gen_request* request, const areal_completion** out);
  static areal_status* set_reward(void* ctx, areal_str completion_id, double reward);
  static areal_status* chat(void* ctx, areal_str request_json, const areal_writer* out);

  std::string episode_id_;
  const areal_inference_vtable* vtable_;
  void* inference_self_;
  uint64_t seed_base_;
  areal_episode_api api_{};
  const areal_gateway_vtable* gateway_ = nullptr;
  void* gateway_self_ = nullptr;
  std::string session_id_;
  mutable std::mutex mutex_;
  std::deque<RecordedCompletion> completions_;  // deque: views stay valid as it grows
};

}  // namespace areal
