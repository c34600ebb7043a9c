#include "worker_router.hpp"
#include "core/text/json_depth.hpp"

#include <algorithm>
#include <chrono>
#include <numeric>
#include <sstream>
#include <cstdint>

#include <Poco/Exception.h>
#include <Poco/Net/NetException.h>
#include <Poco/Net/HTTPRequest.h>
#include <Poco/Net/HTTPResponse.h>
#include <Poco/StreamCopier.h>
#include <Poco/Timespan.h>

#include "http_error.hpp"
#include "request.hpp"

namespace areal::gateway {

namespace {

using nlohmann::json;
constexpr size_t kMaxRoutes = size_t{1} << 20;  // remembered keys and sessions, oldest forgotten first
const char* const kForwardedHeaders[] = {"Authorization", "x-api-key", "anthropic-version", "anthropic-beta", "Content-Type", "Accept"};

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

Poco::Timespan seconds(double s) { return Poco::Timespan(static_cast<Poco::Timespan::TimeDiff>(s * 1e6)); }

}  // namespace

WorkerRouter::WorkerRouter(const std::vector<std::string>& urls, double idle_timeout_s, std::function<bool(const std::string&)> is_admin)
    : idle_timeout_s_(idle_timeout_s), is_admin_(std::move(is_admin)) {
  for (const auto& text : urls) {
    auto w = std::make_unique<Worker>();
    w->url = text;
    while (!w->url.empty() && w->url.back() == '/') w->url.pop_back();
    if (w->url.rfind("http://", 0) != 0) throw HttpError(400, "gateway.workers: '" + text + "' is not an http:// URL");
    std::string rest = w->url.substr(7);
    if (auto slash = rest.find('/'); slash != std::string::npos) w->prefix = rest.substr(slash), rest.resize(slash);
    if (auto colon = rest.rfind(':'); colon != std::string::npos) {
      w->host = rest.substr(0, colon);
      w->port = static_cast<uint16_t>(std::stoi(rest.substr(colon + 1)));
    } else {
      w->host = rest;
    }
    workers_.push_back(std::move(w));
  }
}

json WorkerRouter::health() {
  json workers = json::array();
  for (const auto& w : workers_) workers.push_back({{"url", w->url}, {"sessions", w->sessions.load()}});
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

bool WorkerRouter::forward(Worker& w, Poco::Net::HTTPServerRequest& req, const std::string& body, Poco::Net::HTTPServerResponse& res,
                           bool capture, Forwarded& out, bool send_to_client) {
  Poco::Net::HTTPRequest up(req.getMethod(), w.prefix + req.getURI(), Poco::Net::HTTPMessage::HTTP_1_1);
  up.setHost(w.host, w.port);
  for (const char* h : kForwardedHeaders)
    if (req.has(h)) up.set(h, req.get(h));
  if (!body.empty() || req.getMethod() == "POST") up.setContentLength(static_cast<std::streamsize>(body.size()));
  up.setKeepAlive(true);
  Poco::Net::HTTPResponse resp;
  std::unique_ptr<Poco::Net::HTTPClientSession> s;
  std::istream* in = nullptr;
  // A reused keep-alive connection may have been closed by the worker while
  // idle: then one retry on a fresh connection, but only when nothing came
  // back (sending failed, or no response at all), so a request the worker
  // received is never sent twice.
  for (int attempt = 0; attempt < 2 && in == nullptr; ++attempt) {
    bool reused = false;
    {
      std::lock_guard<std::mutex> lock(w.idle_mutex);
      if (attempt == 0 && !w.idle.empty()) {
        s = std::move(w.idle.back());
        w.idle.pop_back();
        reused = true;
      }
    }
    if (!s) {
      s = std::make_unique<Poco::Net::HTTPClientSession>(w.host, w.port);
      s->setKeepAlive(true);
    }
    s->setTimeout(seconds(5), seconds(idle_timeout_s_), seconds(idle_timeout_s_));
    bool sent = false;
    try {
      std::ostream& o = s->sendRequest(up);
      o << body;
      sent = true;
      in = &s->receiveResponse(resp);
    } catch (const Poco::Net::NoMessageException&) {
      s.reset();
      if (!reused) return false;
    } catch (const Poco::Exception&) {
      s.reset();
      if (!reused || sent) {
        if (!reused) w.down_until_ms = now_ms() + 5000;
        if (sent && reused) throw HttpError(502, "worker gateway " + w.url + " failed while answering", "backend_unavailable");
        return false;
      }
    }
  }
  if (in == nullptr) return false;
  out.status = static_cast<int>(resp.getStatus());
  const std::string type = resp.getContentType();
  const bool stream = type.rfind("text/event-stream", 0) == 0;
  // std::istream turns a cut connection into a failed read: a body read to
  // its end leaves eof set and bad clear, anything else is a truncated answer.
  auto cut = [&] { return in->bad() || !in->eof(); };
  if (!send_to_client || capture || !stream) {
    std::string text;
    Poco::StreamCopier::copyToString(*in, text);
    // A worker that dies mid-body closes cleanly (EOF): compare with the length it announced.
    if (cut() || (resp.hasContentLength() && static_cast<int64_t>(text.size()) != resp.getContentLength64())) throw HttpError(502, "worker gateway " + w.url + " went away mid-answer", "backend_unavailable");
    if (capture || !send_to_client) out.body = text;
    if (send_to_client) {
      res.setStatusAndReason(resp.getStatus(), resp.getReason());
      res.setContentType(type);
      res.setContentLength(static_cast<std::streamsize>(text.size()));
      res.send() << text;
    }
  } else {
    // Server-sent events: pass each line on, flushing at every event's end.
    res.setStatusAndReason(resp.getStatus(), resp.getReason());
    res.setContentType(type);
    res.set("Cache-Control", "no-cache");
    res.setChunkedTransferEncoding(true);
    std::ostream& o = res.send();
    std::string line, last_data;
    while (std::getline(*in, line)) {
      o << line << '\n';
      if (line.rfind("data:", 0) == 0) last_data = line;
      if (line.empty() || line == "\r") o.flush();
      if (!o.good()) return true;  // the client left; the worker finishes and records the call
    }
    // A worker killed mid-stream closes cleanly too: a stream is whole only
    // when its last event is one of the three APIs' terminal events (or the
    // gateway's own in-band error).
    const bool terminal = last_data.rfind("data: [DONE]", 0) == 0 || last_data.rfind("data: {\"error\"", 0) == 0 ||
                          last_data.find("\"type\":\"message_stop\"") != std::string::npos ||
                          last_data.find("\"type\":\"response.completed\"") != std::string::npos ||
                          last_data.find("\"type\":\"response.failed\"") != std::string::npos ||
                          last_data.find("\"type\":\"response.incomplete\"") != std::string::npos;
    if (cut() || !terminal) {
      // Too late for a status: say so in-band, as the gateway does for its own stream errors.
      o << "data: " << nlohmann::json{{"error", {{"message", "worker gateway " + w.url + " went away mid-stream"}, {"type", "api_error"},
                                                 {"param", nullptr}, {"code", "backend_unavailable"}}}}.dump()
        << "\n\n";
      o.flush();
      return true;
    }
    o.flush();
  }
  if (s && resp.getKeepAlive()) {
    std::lock_guard<std::mutex> lock(w.idle_mutex);
    w.idle.push_back(std::move(s));
  }
  return true;
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
      const int64_t now = now_ms();
      auto rank = [&](size_t i) { return std::make_pair(workers_[i]->down_until_ms > now, workers_[i]->sessions.load()); };
      std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t c) { return rank(a) < rank(c); });
    }
  }
  Forwarded last;
  bool reached = false;
  for (size_t i : order) {
    Forwarded f;
    if (!forward(*workers_[i], req, body, res, true, f, false)) continue;
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
  Forwarded f;
  if (path == "/rl/start_session" || path == "/rl/v1/start_session") return start_session(req, body, res);
  size_t target = 0;
  std::string token, rest;
  if (scoped_route(path, target, token, rest)) {
    // The worker rewrites the URL and checks the session (404 unknown, 410 ended).
    Worker& w = *workers_[target];
    if (!forward(w, req, body, res, false, f)) throw HttpError(502, "worker gateway " + w.url + " is unreachable", "backend_unavailable");
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
  if (!forward(w, req, body, res, false, f)) throw HttpError(502, "worker gateway " + w.url + " is unreachable", "backend_unavailable");
  if ((path == "/rl/end_session" || path == "/rl/v1/finalize") && f.status == 200) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (live_keys_.erase(token) > 0) --w.sessions;
  }
}

}  // namespace areal::gateway
