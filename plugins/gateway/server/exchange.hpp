// One request and its response, as the route handlers see them: Poco's
// HTTPServerRequest / HTTPServerResponse interfaces, over a request the
// connection loop has already read whole and a socket a worker writes to.
// The handlers were written against Poco's server; they keep working
// unchanged on this one.
#pragma once

#include <cstddef>
#include <istream>
#include <ostream>
#include <sstream>
#include <streambuf>
#include <string>

#include <Poco/AutoPtr.h>
#include <Poco/Net/HTTPServerParams.h>
#include <Poco/Net/HTTPServerRequest.h>
#include <Poco/Net/HTTPServerResponse.h>
#include <Poco/Net/SocketAddress.h>

#include "request_reader.hpp"

namespace areal::gateway::server {

// Response bytes to a blocking socket (send timeout set by the caller), as
// they are, chunk-framed, or dropped (a HEAD response's body). A failed send
// makes every later write fail, so a handler streaming to a client that left
// sees its ostream go bad.
class SocketOutput : public std::streambuf {
 public:
  enum class Mode { kRaw, kChunked, kDiscard };
  explicit SocketOutput(int fd) : fd_(fd) { setp(buffer_, buffer_ + sizeof buffer_); }
  void set_mode(Mode mode) { mode_ = mode; }
  // Writes bytes as they are (the status line and headers), after what is buffered.
  bool write_raw(const char* data, size_t size);
  // Sends what is buffered; with chunked framing, ends the body with the last chunk.
  bool finish();
  bool failed() const { return failed_; }
  size_t body_bytes() const { return body_bytes_; }

 protected:
  int_type overflow(int_type c) override;
  int sync() override;

 private:
  bool flush_buffer();
  bool send_all(const char* data, size_t size);

  int fd_;
  Mode mode_ = Mode::kRaw;
  bool failed_ = false;
  size_t body_bytes_ = 0;
  char buffer_[16384];
};

class ServerResponse : public Poco::Net::HTTPServerResponse {
 public:
  // `request_keep_alive`: the client allows reuse; `head`: send no body.
  ServerResponse(int fd, bool request_keep_alive, bool head);

  void sendContinue() override;
  std::ostream& send() override;
  void sendFile(const std::string& path, const std::string& media_type) override;
  void sendBuffer(const void* buffer, std::size_t length) override;
  void redirect(const std::string& uri, HTTPStatus status) override;
  void requireAuthentication(const std::string& realm) override;
  bool sent() const override { return sent_; }

  // Completes the response; true when the connection may carry another request.
  bool finish();

 private:
  SocketOutput output_;
  std::ostream stream_;
  bool request_keep_alive_;
  bool head_;
  bool sent_ = false;
  bool keep_alive_ = false;
};

class ServerRequest : public Poco::Net::HTTPServerRequest {
 public:
  ServerRequest(ParsedRequest parsed, const Poco::Net::SocketAddress& client, const Poco::Net::SocketAddress& server,
                const Poco::Net::HTTPServerParams& params, ServerResponse& response);

  std::istream& stream() override { return body_; }
  const Poco::Net::SocketAddress& clientAddress() const override { return client_; }
  const Poco::Net::SocketAddress& serverAddress() const override { return server_; }
  const Poco::Net::HTTPServerParams& serverParams() const override { return params_; }
  Poco::Net::HTTPServerResponse& response() const override { return response_; }
  bool secure() const override { return false; }

 private:
  std::istringstream body_;
  Poco::Net::SocketAddress client_, server_;
  const Poco::Net::HTTPServerParams& params_;
  ServerResponse& response_;
};

}  // namespace areal::gateway::server
