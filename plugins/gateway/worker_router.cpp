#include "worker_router.hpp"
#include "core/text/json_depth.hpp"

#include <algorithm>
#include <numeric>
#include <cstdint>


#include "http_error.hpp"
#include "request.hpp"

namespace areal::gateway {

namespace {

using nlohmann::json;
constexpr size_t kMaxRoutes = size_t{1} << 20;  // remembered keys and sessions, oldest forgotten first

}  // namespace

WorkerRouter::WorkerRouter(const std::vector<std::string>& urls, double idle_timeout_s, std::function<bool(const std::string&)> is_admin)
    : is_admin_(std::move(is_admin)) {
  for (const auto& text : urls) {
    try {
      workers_.push_back(std::make_unique<Worker>(text, idle_timeout_s));
    } catch (const HttpError& e) {
      throw HttpError(400, std::string("gateway.workers: ") + e.what());
    }
  }
}

json WorkerRouter::health() {
  json workers = json::array();
  for (const auto& w : workers_) workers.push_back({{"url", w->up.url()}, {"sessions", w->sessions.load()}});
  return {{"status", "ok"}, {"mode", "router"}, {"workers", workers.size()}, {"routes", workers}};
}

void WorkerRouter::remember(std::unordered_map<std::string, size_t>& map, std::deque<std::string>& order, const std::string& key,
                            size_t worker) {
  if (key.empty()) return;
  if (map.emplace(key, worker).second) {
    order.push_back(key);
    if (order.size() > kMaxRoutes) {
      map.erase(order.front());
      if (&map == &by_key_) live_keys_.erase(order.front());
      if (&map == &by_session_) key_of_session_.erase(order.front());
      order.pop_front();
    }
  } else {
    map[key] = worker;
  }
}

size_t WorkerRouter::worker_of_key(const std::string& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = by_key_.find(key);
  if (it == by_key_.end()) throw HttpError(401, "Invalid session key", "invalid_api_key");
  return it->second;
}

void WorkerRouter::start_session(Poco::Net::HTTPServerRequest& req, const std::string& body, Poco::Net::HTTPServerResponse& res) {
  std::string api_key;
  const json b = areal::text::parse_json_bounded_or_discarded(body.empty() ? "{}" : body);
  if (b.is_object() && b.contains("api_key") && b["api_key"].is_string()) api_key = b["api_key"];
  std::vector<size_t> order(workers_.size());
  std::iota(order.begin(), order.end(), 0);
  bool refresh = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = api_key.empty() ? by_key_.end() : by_key_.find(api_key);
    if (it != by_key_.end()) {
      // The worker that knows the key: a refresh (it ends and exports the live
      // session first) or the reuse of an ended key (a new session there).
      order = {it->second};
      refresh = live_keys_.count(api_key) > 0;
    } else {
      const int64_t now = steady_now_ms();
      auto rank = [&](size_t i) { return std::make_pair(workers_[i]->up.down_until_ms() > now, workers_[i]->sessions.load()); };
      std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t c) { return rank(a) < rank(c); });
    }
  }
  Upstream::Answer last;
  bool reached = false;
  for (size_t i : order) {
    Upstream::Answer f;
    if (!workers_[i]->up.forward(req, body, res, true, f, false)) continue;
    reached = true;
    last = f;
    if (f.status == 429 && i != order.back()) continue;  // that worker has no capacity: try the next
    if (f.status == 200) {
      const json r = areal::text::parse_json_bounded_or_discarded(f.body);
      if (r.is_object()) {
        std::lock_guard<std::mutex> lock(mutex_);
        remember(by_key_, key_order_, r.value("api_key", std::string()), i);
        live_keys_.insert(r.value("api_key", std::string()));
        remember(by_session_, session_order_, r.value("session_id", std::string()), i);
        key_of_session_[r.value("session_id", std::string())] = r.value("api_key", std::string());
      }
      if (!refresh) ++workers_[i]->sessions;  // a refresh replaces the session the worker ended
    }
    break;
  }
  if (!reached) throw HttpError(502, "no worker gateway is reachable", "backend_unavailable");
  res.setStatusAndReason(static_cast<Poco::Net::HTTPResponse::HTTPStatus>(last.status));
  res.setContentType("application/json");
  res.setContentLength(static_cast<std::streamsize>(last.body.size()));
  res.send() << last.body;
}

bool WorkerRouter::scoped_route(const std::string& path, size_t& worker, std::string& key, std::string& rest) {
  std::string head;
  if (!split_session_path(path, head, rest)) return false;
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto it = by_session_.find(head); it != by_session_.end()) {
    worker = it->second;
    key = key_of_session_.count(head) ? key_of_session_[head] : std::string();
    return true;
  }
  if (auto it = by_key_.find(head); it != by_key_.end()) {
    worker = it->second;
    key = head;
    return true;
  }
  throw HttpError(404, "Unknown session '" + head + "' in the URL: start one with /rl/start_session");
}

void WorkerRouter::handle(const std::string& path, Poco::Net::HTTPServerRequest& req, const std::string& body,
                          Poco::Net::HTTPServerResponse& res) {
  Upstream::Answer f;
  if (path == "/rl/start_session" || path == "/rl/v1/start_session") return start_session(req, body, res);
  size_t target = 0;
  std::string token, rest;
  if (scoped_route(path, target, token, rest)) {
    // The worker rewrites the URL and checks the session (404 unknown, 410 ended).
    Worker& w = *workers_[target];
    if (!w.up.forward(req, body, res, false, f)) throw HttpError(502, "worker gateway " + w.up.url() + " is unreachable", "backend_unavailable");
    if ((rest == "/rl/end_session" || rest == "/v1/rl/end_session" || rest == "/rl/v1/finalize" || rest == "/v1/rl/v1/finalize") && f.status == 200) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (live_keys_.erase(token) > 0) --w.sessions;
    }
    return;
  }
  if (path == "/export_trajectories") {
    const json b = areal::text::parse_json_bounded_or_discarded(body.empty() ? "{}" : body);
    if (!b.is_object() || !b.contains("session_id") || !b["session_id"].is_string())
      throw HttpError(400, "'session_id' is required: the router finds the session's worker by it");
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = by_session_.find(b["session_id"].get<std::string>());
    if (it == by_session_.end()) throw HttpError(404, "Session " + b["session_id"].get<std::string>() + " was not started through this router");
    target = it->second;
  } else if (path == "/grant_capacity" || path == "/v1/models" || path == "/models") {
    target = next_capacity_++ % workers_.size();
  } else {
    token = bearer_token(req);
    target = is_admin_(token) ? next_capacity_++ % workers_.size() : worker_of_key(token);
  }
  Worker& w = *workers_[target];
  if (!w.up.forward(req, body, res, false, f)) throw HttpError(502, "worker gateway " + w.up.url() + " is unreachable", "backend_unavailable");
  if ((path == "/rl/end_session" || path == "/rl/v1/finalize") && f.status == 200) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (live_keys_.erase(token) > 0) --w.sessions;
  }
}

}  // namespace areal::gateway
