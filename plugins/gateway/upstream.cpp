#include "upstream.hpp"

#include <chrono>
#include <ostream>

#include <Poco/Exception.h>
#include <Poco/Net/NetException.h>
#include <Poco/Net/HTTPRequest.h>
#include <Poco/Net/HTTPResponse.h>
#include <Poco/StreamCopier.h>
#include <Poco/Timespan.h>
#include <nlohmann/json.hpp>

#include "http_error.hpp"

namespace areal::gateway {

namespace {

const char* const kForwardedHeaders[] = {"Authorization", "x-api-key", "anthropic-version", "anthropic-beta", "Content-Type", "Accept"};

Poco::Timespan seconds(double s) { return Poco::Timespan(static_cast<Poco::Timespan::TimeDiff>(s * 1e6)); }

}  // namespace

int64_t steady_now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

Upstream::Upstream(const std::string& text, double idle_timeout_s) : url_(text), idle_timeout_s_(idle_timeout_s) {
  while (!url_.empty() && url_.back() == '/') url_.pop_back();
  if (url_.rfind("http://", 0) != 0) throw HttpError(400, "'" + text + "' is not an http:// URL");
  std::string rest = url_.substr(7);
  if (auto slash = rest.find('/'); slash != std::string::npos) prefix_ = rest.substr(slash), rest.resize(slash);
  if (auto colon = rest.rfind(':'); colon != std::string::npos) {
    host_ = rest.substr(0, colon);
    port_ = static_cast<uint16_t>(std::stoi(rest.substr(colon + 1)));
  } else {
    host_ = rest;
  }
}

bool Upstream::forward(Poco::Net::HTTPServerRequest& req, const std::string& body, Poco::Net::HTTPServerResponse& res, bool capture,
                       Answer& out, bool send_to_client) {
  Poco::Net::HTTPRequest up(req.getMethod(), prefix_ + req.getURI(), Poco::Net::HTTPMessage::HTTP_1_1);
  up.setHost(host_, port_);
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
      std::lock_guard<std::mutex> lock(idle_mutex_);
      if (attempt == 0 && !idle_.empty()) {
        s = std::move(idle_.back());
        idle_.pop_back();
        reused = true;
      }
    }
    if (!s) {
      s = std::make_unique<Poco::Net::HTTPClientSession>(host_, port_);
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
        if (!reused) down_until_ms_ = steady_now_ms() + 5000;
        if (sent && reused) throw HttpError(502, "upstream gateway " + url_ + " failed while answering", "backend_unavailable");
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
    if (cut() || (resp.hasContentLength() && static_cast<int64_t>(text.size()) != resp.getContentLength64())) throw HttpError(502, "upstream gateway " + url_ + " went away mid-answer", "backend_unavailable");
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
                          last_data.find("\"type\":\"error\"") != std::string::npos ||  // the Anthropic and Responses error events
                          last_data.find("\"type\":\"response.completed\"") != std::string::npos ||
                          last_data.find("\"type\":\"response.failed\"") != std::string::npos ||
                          last_data.find("\"type\":\"response.incomplete\"") != std::string::npos;
    if (cut() || !terminal) {
      // Too late for a status: say so in-band, as the gateway does for its own stream errors.
      o << "data: " << nlohmann::json{{"error", {{"message", "upstream gateway " + url_ + " went away mid-stream"}, {"type", "api_error"},
                                                 {"param", nullptr}, {"code", "backend_unavailable"}}}}.dump()
        << "\n\n";
      o.flush();
      return true;
    }
    o.flush();
  }
  if (s && resp.getKeepAlive()) {
    std::lock_guard<std::mutex> lock(idle_mutex_);
    idle_.push_back(std::move(s));
  }
  return true;
}

}  // namespace areal::gateway
