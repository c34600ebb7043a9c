// Blocking HTTP/1.1 calls to an inference server, on Poco: a JSON call that
// returns status and body, and a streaming POST read line by line (SSE)
// that another thread may cancel by closing its socket.
#pragma once

#include <atomic>
#include <istream>
#include <memory>
#include <mutex>
#include <string>
#include <cstdint>

#include <Poco/Net/HTTPClientSession.h>

namespace areal::remote {

// A server base URL: http://HOST:PORT[/PREFIX]. https is refused (put a
// local proxy in front); the prefix is prepended to every path.
struct Url {
  std::string text;  // as configured, without a trailing '/'
  std::string host;
  uint16_t port = 80;
  std::string prefix;
};
Url parse_url(const std::string& text);  // throws std::invalid_argument with the reason

struct HttpResult {
  int status = 0;
  std::string body;
};

// One request on a fresh connection. Throws Poco::Exception (or std::
// exceptions) when the server cannot be reached or stops answering.
HttpResult http_call(const Url& url, const std::string& method, const std::string& path, const std::string& json_body,
                     double timeout_s);

// The message of an error body: {"error": {"message"}}, {"message"},
// {"detail"}, or the text itself (cut to 300 characters).
std::string error_message(const std::string& body);
// Whether an error body names a server-side failure: an HTTP status it
// carries (vLLM's error.code, SGLang's status_code) of 5xx, 408 or 429.
// Without one it is the request's fault: SGLang reports only a request's
// ValueError inside a stream.
bool error_is_server_side(const std::string& body);

// A streaming POST. post() sends and returns the status; read_line() then
// yields the body line by line; cancel() (any thread) closes the socket so a
// blocked read returns at once.
class StreamCall {
 public:
  StreamCall(const Url& url, double connect_timeout_s, double idle_timeout_s);
  StreamCall(const StreamCall&) = delete;
  StreamCall& operator=(const StreamCall&) = delete;

  int post(const std::string& path, const std::string& json_body);
  bool read_line(std::string& line);  // false at the end of the body
  std::string read_rest();            // the remaining body (error responses)
  void cancel();
  bool cancelled() const { return cancelled_; }

 private:
  const Url& url_;
  Poco::Net::HTTPClientSession session_;
  std::istream* in_ = nullptr;
  std::mutex mutex_;  // guards the socket between post() and cancel()
  std::atomic<bool> cancelled_{false};
  bool connected_ = false;
};

}  // namespace areal::remote
