// One gateway this process forwards requests to over HTTP: a router-mode
// worker (worker_router.hpp) or a managed-service job's own gateway
// (host/service). Keep-alive connections are pooled; answers stream through
// as they arrive (SSE included), with no total timeout.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>
#include <cstdint>

#include <Poco/Net/HTTPClientSession.h>
#include <Poco/Net/HTTPServerRequest.h>
#include <Poco/Net/HTTPServerResponse.h>

namespace areal::gateway {

class Upstream {
 public:
  struct Answer {
    int status = 0;
    std::string body;  // only when captured
  };

  // url: http://HOST:PORT[/prefix] (HttpError 400 otherwise); idle_timeout_s:
  // the longest silence within one answer.
  Upstream(const std::string& url, double idle_timeout_s);

  // Sends `req` (its method, URI, credentials and content headers) with
  // `body` and streams the answer to `res`; with `capture` the body is also
  // kept in out.body; with send_to_client false it is only kept. Returns
  // false when the upstream could not be reached before anything was sent
  // to the client (a request it received is never sent twice). Throws
  // HttpError 502 when it fails mid-answer.
  bool forward(Poco::Net::HTTPServerRequest& req, const std::string& body, Poco::Net::HTTPServerResponse& res, bool capture, Answer& out,
               bool send_to_client = true);

  const std::string& url() const { return url_; }
  // Until when (steady clock, ms) a failed connection marks it down.
  int64_t down_until_ms() const { return down_until_ms_.load(); }

 private:
  std::string url_, host_, prefix_;
  uint16_t port_ = 80;
  double idle_timeout_s_;
  std::atomic<int64_t> down_until_ms_{0};
  std::mutex idle_mutex_;  // keep-alive connections not in use
  std::vector<std::unique_ptr<Poco::Net::HTTPClientSession>> idle_;
};

int64_t steady_now_ms();

}  // namespace areal::gateway
