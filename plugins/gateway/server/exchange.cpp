#include "exchange.hpp"

#include <cerrno>
#include <cstdio>

#include <sys/socket.h>

#include <Poco/Exception.h>
#include <Poco/String.h>

namespace areal::gateway::server {

bool SocketOutput::send_all(const char* data, size_t size) {
  while (size > 0 && !failed_) {
    const ssize_t n = ::send(fd_, data, size, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      failed_ = true;  // peer gone, or the send timeout passed: the client is not reading
      break;
    }
    data += n;
    size -= static_cast<size_t>(n);
  }
  return !failed_;
}

bool SocketOutput::flush_buffer() {
  const size_t n = static_cast<size_t>(pptr() - pbase());
  setp(buffer_, buffer_ + sizeof buffer_);
  if (n == 0 || failed_) return !failed_;
  body_bytes_ += n;
  switch (mode_) {
    case Mode::kDiscard: return true;
    case Mode::kRaw: return send_all(buffer_, n);
    case Mode::kChunked: {
      char size_line[32];
      const int len = std::snprintf(size_line, sizeof size_line, "%zx\r\n", n);
      return send_all(size_line, static_cast<size_t>(len)) && send_all(buffer_, n) && send_all("\r\n", 2);
    }
  }
  return false;
}

bool SocketOutput::write_raw(const char* data, size_t size) {
  if (pptr() != pbase() && !flush_buffer()) return false;
  return send_all(data, size);
}

SocketOutput::int_type SocketOutput::overflow(int_type c) {
  if (!flush_buffer()) return traits_type::eof();
  if (traits_type::eq_int_type(c, traits_type::eof())) return traits_type::not_eof(c);
  *pptr() = traits_type::to_char_type(c);
  pbump(1);
  return c;
}

int SocketOutput::sync() { return flush_buffer() ? 0 : -1; }

bool SocketOutput::finish() {
  if (!flush_buffer()) return false;
  if (mode_ == Mode::kChunked) return send_all("0\r\n\r\n", 5);
  return !failed_;
}

ServerResponse::ServerResponse(int fd, bool request_keep_alive, bool head)
    : output_(fd), stream_(&output_), request_keep_alive_(request_keep_alive), head_(head) {
  setVersion(HTTP_1_1);
}

void ServerResponse::sendContinue() {
  static const char kContinue[] = "HTTP/1.1 100 Continue\r\n\r\n";
  output_.write_raw(kContinue, sizeof kContinue - 1);
}

std::ostream& ServerResponse::send() {
  if (sent_) throw Poco::IllegalStateException("the response was already sent");
  sent_ = true;
  // Poco's setStatus() leaves the reason at "OK": every status gets its own phrase.
  if (getReason().empty() || (getReason() == HTTP_REASON_OK && getStatus() != HTTP_OK)) setReason(getReasonForStatus(getStatus()));
  // A body without Content-Length or chunked framing ends when the connection closes.
  const bool framed = getChunkedTransferEncoding() || hasContentLength() || head_;
  keep_alive_ = request_keep_alive_ && getKeepAlive() && framed;
  setKeepAlive(keep_alive_);
  std::ostringstream head;
  write(head);
  const std::string text = head.str();
  output_.write_raw(text.data(), text.size());
  output_.set_mode(head_ ? SocketOutput::Mode::kDiscard
                         : getChunkedTransferEncoding() ? SocketOutput::Mode::kChunked : SocketOutput::Mode::kRaw);
  return stream_;
}

void ServerResponse::sendBuffer(const void* buffer, std::size_t length) {
  setContentLength(static_cast<std::streamsize>(length));
  setChunkedTransferEncoding(false);
  send().write(static_cast<const char*>(buffer), static_cast<std::streamsize>(length));
}

void ServerResponse::sendFile(const std::string&, const std::string&) {
  throw Poco::NotImplementedException("the gateway serves no files");
}

void ServerResponse::redirect(const std::string& uri, HTTPStatus status) {
  setStatusAndReason(status);
  set("Location", uri);
  sendBuffer("", 0);
}

void ServerResponse::requireAuthentication(const std::string& realm) {
  setStatusAndReason(HTTP_UNAUTHORIZED);
  set("WWW-Authenticate", "Basic realm=\"" + realm + "\"");
  sendBuffer("", 0);
}

bool ServerResponse::finish() {
  if (!sent_) return false;
  stream_.flush();
  if (!output_.finish()) return false;
  // A handler that wrote less or more than its Content-Length leaves the framing unknown.
  if (hasContentLength() && !head_ && static_cast<std::streamsize>(output_.body_bytes()) != getContentLength()) return false;
  return keep_alive_;
}

ServerRequest::ServerRequest(ParsedRequest parsed, const Poco::Net::SocketAddress& client, const Poco::Net::SocketAddress& server,
                             const Poco::Net::HTTPServerParams& params, ServerResponse& response)
    : body_(std::move(parsed.body)), client_(client), server_(server), params_(params), response_(response) {
  setMethod(parsed.method);
  setURI(parsed.target);
  setVersion(parsed.version);
  for (auto& [name, value] : parsed.headers) {
    // The body arrives de-chunked: handlers see its length, not the framing.
    if (parsed.chunked && Poco::icompare(name, "Transfer-Encoding") == 0) continue;
    add(name, value);
  }
  if (parsed.chunked) setContentLength(static_cast<std::streamsize>(body_.str().size()));
}

}  // namespace areal::gateway::server
