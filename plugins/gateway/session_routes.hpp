// The session endpoints of the agent proxy (AReaL's contract, docs/http-api.md):
// /rl/start_session, /rl/end_session, /rl/set_reward, /grant_capacity,
// /export_trajectories.
#pragma once

#include <mutex>
#include <string>
#include <memory>

#include <Poco/Net/HTTPServerRequest.h>
#include <Poco/Net/HTTPServerResponse.h>

#include "plugins/gateway/proxy/session_store.hpp"

namespace areal::gateway {

struct SessionSettings {
  double turn_discount = 1.0;        // default discount for export
  std::string export_style = "individual";
  // What /export_trajectories answers: "rows" (ours), "areal" (AReaL's
  // interactions, for its OpenAIProxyClient) or "both".
  std::string export_format = "both";
  std::string trajectories_jsonl;    // exported sessions are also appended here (empty: off)
  size_t max_request_bytes = 32u << 20;
};

class SessionRoutes {
 public:
  SessionRoutes(proxy::SessionStore& store, SessionSettings settings);

  // Handles the request if its path is a session endpoint; false otherwise.
  bool handle(const std::string& path, Poco::Net::HTTPServerRequest& req, const std::string& body, Poco::Net::HTTPServerResponse& res);

  // The session a bearer token belongs to: 401 unknown, 410 ended.
  std::shared_ptr<proxy::Session> session_of(const Poco::Net::HTTPServerRequest& req) const;

  // Appends an exported session to settings().trajectories_jsonl (if set).
  // Never throws: a write that fails is logged and counted
  // (areal_gateway_trajectories_jsonl_errors_total), the session delivered.
  void append_jsonl(const nlohmann::ordered_json& exported);
  const SessionSettings& settings() const { return settings_; }

 private:
  void require_admin(const Poco::Net::HTTPServerRequest& req) const;

  proxy::SessionStore& store_;
  SessionSettings settings_;
  std::mutex jsonl_mutex_;
};

}  // namespace areal::gateway
