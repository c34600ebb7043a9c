// The gateway's session slots (ABI 1.4): the trainer in the same process
// grants capacity, takes ended sessions' trajectories as arrays, and runs
// sessions for its own episodes, without HTTP and without the admin key (it
// holds the instance). Same semantics as the admin endpoints in
// session_routes.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <cstdint>

#include "plugins/gateway/proxy/chat_service.hpp"
#include "plugins/gateway/proxy/session_store.hpp"
#include "areal/plugin_api.h"
#include "session_routes.hpp"

namespace areal::gateway {

class SessionControl {
 public:
  // `chat` may be null (no tokenizer configured): session_chat is then UNSUPPORTED.
  SessionControl(proxy::SessionStore& store, SessionRoutes& routes, std::shared_ptr<proxy::ChatService> chat)
      : store_(store), routes_(routes), chat_(std::move(chat)) {}

  // Each throws areal::Error as areal/gateway.h documents for its slot.
  int64_t grant_capacity(int64_t n);
  std::pair<std::string, std::string> start_session(std::string_view task_id, std::string_view group_id);
  void set_session_reward(std::string_view session_id, std::string_view interaction_id, double reward);
  void end_session(std::string_view session_id);
  void take_finished(int64_t timeout_ms, const areal_trajectory_sink& sink);
  void export_session(std::string_view session_id, double discount, const areal_trajectory_sink& sink);
  std::string session_chat(std::string_view session_id, std::string_view request_json);

 private:
  // Appends the export to the JSONL file (when configured), then lends it to the sink.
  void deliver(const recorder::SessionTrajectory& t, const areal_trajectory_sink& sink);

  proxy::SessionStore& store_;
  SessionRoutes& routes_;
  std::shared_ptr<proxy::ChatService> chat_;
};

}  // namespace areal::gateway
