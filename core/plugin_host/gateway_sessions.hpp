// The host's typed client of a gateway's session slots (ABI 1.4): the
// trainer grants capacity and takes ended sessions; episodes start, reward,
// end and export their own session and chat in it. Trajectories arrive as
// arrays (recorder/trajectory_view.hpp), never as text.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/recorder/trajectory.hpp"
#include "areal/plugin_api.h"

namespace areal {

class GatewaySessions {
 public:
  // Throws UNSUPPORTED when the gateway has no session slots (built
  // against ABI 1.3 or older): such a gateway serves HTTP but cannot hand
  // trajectories to a trainer in this process.
  GatewaySessions(const areal_gateway_vtable* gateway, void* self);

  // Whether the table has the ABI 1.4 session slots.
  static bool supported(const areal_gateway_vtable* gateway);

  int64_t grant_capacity(int64_t n);

  struct Started {
    std::string session_id, api_key;
  };
  Started start(const std::string& task_id, const std::string& group_id);
  // Empty interaction_id: the session's last call that answered.
  void set_reward(const std::string& session_id, double reward, const std::string& interaction_id = "");
  // Throws FAILED_PRECONDITION when the session already ended.
  void end(const std::string& session_id);
  // The next ended session within `timeout`, exported and removed.
  std::optional<recorder::SessionTrajectory> take_finished(std::chrono::milliseconds timeout);
  recorder::SessionTrajectory export_session(const std::string& session_id, double discount);
  // Exactly-once across restarts (ABI 1.5; no-ops for gateways without the
  // slots): sessions from take_finished trained for the checkpoint about to
  // be written, and that checkpoint once written (or resumed from).
  bool keeps_sessions_across_restarts() const;
  void mark_trained(const std::vector<std::string>& session_ids, int64_t checkpoint_step);
  void commit_checkpoint(int64_t step);
  // An OpenAI chat completion in the session; returns the plugin's status
  // (the episode API passes it on to the workflow).
  areal_status* chat(const std::string& session_id, areal_str request_json, const areal_writer* out) const;

 private:
  const areal_gateway_vtable* vt_;
  void* self_;
};

}  // namespace areal
