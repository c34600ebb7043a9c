// Router mode (gateway.workers set): this gateway serves no model itself but
// spreads sessions over several worker gateways (`areal-host serve`
// processes, each with its own backend), as AReaL's proxy gateway does.
//
// start_session goes to the worker with the fewest sessions routed to it
// (a 429 there tries the others; a key being refreshed goes back to the
// worker that holds it, which ends and exports the old session); every
// request made with a session key goes to that session's worker;
// export_trajectories goes to the worker of its session_id; grant_capacity,
// /v1/models and calls made with the admin key (no session) round-robin;
// session-scoped URLs (/{session id or key}/v1/...) go to that session's
// worker, which checks the session itself. Responses stream through as they
// arrive (SSE included), with no total timeout; an unreachable worker is a 502.
#pragma once

#include <atomic>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>
#include <cstdint>

#include <Poco/Net/HTTPServerRequest.h>
#include <Poco/Net/HTTPServerResponse.h>
#include <nlohmann/json.hpp>

#include "upstream.hpp"

namespace areal::gateway {

class WorkerRouter {
 public:
  // is_admin: the router's admin key check (the workers must share that key).
  WorkerRouter(const std::vector<std::string>& worker_urls, double idle_timeout_s, std::function<bool(const std::string&)> is_admin);

  // Answers any request but /health and /metrics. Throws HttpError for the
  // router's own refusals (401 unknown key, 404 unknown session, 502).
  void handle(const std::string& path, Poco::Net::HTTPServerRequest& req, const std::string& body, Poco::Net::HTTPServerResponse& res);
  nlohmann::json health();

 private:
  struct Worker {
    Worker(const std::string& url, double idle_timeout_s) : up(url, idle_timeout_s) {}
    Upstream up;
    std::atomic<int64_t> sessions{0};
  };

  void start_session(Poco::Net::HTTPServerRequest& req, const std::string& body, Poco::Net::HTTPServerResponse& res);
  void remember(std::unordered_map<std::string, size_t>& map, std::deque<std::string>& order, const std::string& key, size_t worker);
  size_t worker_of_key(const std::string& key);
  // For /{session id or key}/<api path>: the session's worker and key.
  bool scoped_route(const std::string& path, size_t& worker, std::string& key, std::string& rest);

  std::vector<std::unique_ptr<Worker>> workers_;
  std::function<bool(const std::string&)> is_admin_;
  std::mutex mutex_;  // the route tables
  std::unordered_map<std::string, size_t> by_key_, by_session_;
  std::unordered_map<std::string, std::string> key_of_session_;  // as long as by_session_ remembers the session
  std::unordered_set<std::string> live_keys_;  // keys whose session has not ended through the router
  std::deque<std::string> key_order_, session_order_;  // oldest first, for bounded tables
  std::atomic<size_t> next_capacity_{0};
};

}  // namespace areal::gateway
