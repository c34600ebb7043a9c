// HTTP/1.1 request framing, fed bytes as they arrive: request line, headers
// and the whole body (Content-Length or chunked), with hard limits on each.
// No I/O and no clock here: the connection loop owns sockets and deadlines,
// so this part can be fuzzed and unit-tested on bytes alone.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace areal::gateway::server {

struct RequestLimits {
  size_t max_target_bytes = 16u << 10;  // the request target (path and query): 414 beyond
  size_t max_head_bytes = 64u << 10;    // request line and headers together: 431 beyond
  size_t max_header_count = 256;        // 431 beyond
  size_t max_body_bytes = 32u << 20;    // gateway.max_request_bytes: 413 beyond
};

struct ParsedRequest {
  std::string method;
  std::string target;   // as sent: path and query
  std::string version;  // "HTTP/1.1" or "HTTP/1.0"
  std::vector<std::pair<std::string, std::string>> headers;  // in order; names as sent
  std::string body;     // de-chunked
  bool keep_alive = true;
  bool chunked = false;  // the body came chunked (its Transfer-Encoding is not passed on)
};

// A request that cannot be read. The connection is answered `status` and
// closed: after a framing error the next request's start is unknown.
struct ReadError {
  int status = 0;
  std::string message;
};

class RequestReader {
 public:
  enum class State {
    kIdle,   // no byte of a request yet (between keep-alive requests)
    kHead,   // reading the request line and headers
    kBody,   // headers read; reading the body
    kReady,  // a whole request is ready: take() it
    kError,  // error() says why
  };

  explicit RequestReader(RequestLimits limits) : limits_(limits) {}

  // Appends bytes and parses as far as they go.
  State feed(std::string_view bytes);
  // Parses what is buffered (after take(), the next pipelined request may be there already).
  State advance();
  State state() const { return state_; }

  // The ready request; the reader moves on to the next one, keeping any bytes after it.
  ParsedRequest take();
  const ReadError& error() const { return error_; }
  // The method and target once the request line is read (for the error body's shape and logs); else "".
  const std::string& method() const { return request_.method; }
  const std::string& target() const { return request_.target; }
  // The headers asked for `Expect: 100-continue` and the body has not started:
  // the loop sends the interim 100 once (continue_sent()).
  bool wants_continue() const { return state_ == State::kBody && expect_continue_ && !continue_sent_; }
  void continue_sent() { continue_sent_ = true; }

 private:
  State fail(int status, std::string message);
  State parse_head();
  State parse_body();
  State parse_chunks();

  RequestLimits limits_;
  State state_ = State::kIdle;
  std::string buffer_;  // bytes not yet consumed
  ParsedRequest request_;
  ReadError error_;
  size_t body_length_ = 0;  // Content-Length
  bool expect_continue_ = false;
  bool continue_sent_ = false;
  // Chunked body: bytes of the current chunk still due (0 between chunks); in trailers after the last.
  size_t chunk_left_ = 0;
  bool in_chunk_data_ = false;
  bool in_trailers_ = false;
};

}  // namespace areal::gateway::server
