#include "request_reader.hpp"

#include <algorithm>
#include <cctype>

namespace areal::gateway::server {
namespace {

// RFC 9110 token characters (methods and header names).
bool is_token_char(unsigned char c) {
  if (std::isalnum(c)) return true;
  switch (c) {
    case '!': case '#': case '$': case '%': case '&': case '\'': case '*': case '+':
    case '-': case '.': case '^': case '_': case '`': case '|': case '~': return true;
    default: return false;
  }
}

bool is_token(std::string_view s) { return !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) { return is_token_char(c); }); }

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// A line of the head or of a chunked body: up to LF, without the CR before it.
// Returns npos when no whole line is buffered.
size_t line_end(const std::string& buf, size_t from, std::string_view& line) {
  const size_t lf = buf.find('\n', from);
  if (lf == std::string::npos) return std::string::npos;
  size_t end = lf;
  if (end > from && buf[end - 1] == '\r') --end;
  line = std::string_view(buf).substr(from, end - from);
  return lf + 1;
}

// Printable text for an error message quoting the client's bytes.
std::string quoted(std::string_view s) {
  std::string out;
  for (unsigned char c : s.substr(0, 40)) out.push_back(c >= 0x20 && c < 0x7f ? static_cast<char>(c) : '?');
  if (s.size() > 40) out += "...";
  return "'" + out + "'";
}

}  // namespace

RequestReader::State RequestReader::fail(int status, std::string message) {
  error_ = {status, std::move(message)};
  buffer_.clear();
  return state_ = State::kError;
}

RequestReader::State RequestReader::feed(std::string_view bytes) {
  if (state_ == State::kError) return state_;
  buffer_.append(bytes);
  return advance();
}

RequestReader::State RequestReader::advance() {
  if (state_ == State::kIdle) {
    // Empty lines before a request line are allowed (RFC 9112 2.2).
    const size_t start = buffer_.find_first_not_of("\r\n");
    buffer_.erase(0, start == std::string::npos ? buffer_.size() : start);
    if (buffer_.empty()) return state_;
    state_ = State::kHead;
  }
  if (state_ == State::kHead) parse_head();
  if (state_ == State::kBody) parse_body();
  return state_;
}

RequestReader::State RequestReader::parse_head() {
  // The request line alone may already be too long to be worth waiting for.
  const size_t first_lf = buffer_.find('\n');
  if (first_lf == std::string::npos && buffer_.size() > limits_.max_target_bytes + 64)
    return fail(414, "Request target longer than " + std::to_string(limits_.max_target_bytes) + " bytes");
  size_t head_end = buffer_.find("\r\n\r\n");
  size_t head_len = head_end == std::string::npos ? std::string::npos : head_end + 4;
  if (const size_t lflf = buffer_.find("\n\n"); lflf != std::string::npos && lflf + 2 < head_len) head_len = lflf + 2;  // bare-LF client
  if (head_len == std::string::npos) {
    if (buffer_.size() > limits_.max_head_bytes)
      return fail(431, "Request headers larger than " + std::to_string(limits_.max_head_bytes) + " bytes");
    return state_;
  }
  if (head_len > limits_.max_head_bytes + 4) return fail(431, "Request headers larger than " + std::to_string(limits_.max_head_bytes) + " bytes");

  std::string_view line;
  size_t pos = line_end(buffer_, 0, line);
  // Request line: METHOD SP target SP HTTP/1.x
  const size_t sp1 = line.find(' '), sp2 = line.rfind(' ');
  if (sp1 == std::string_view::npos || sp2 == sp1) return fail(400, "Malformed request line " + quoted(line));
  const std::string_view method = line.substr(0, sp1), target = line.substr(sp1 + 1, sp2 - sp1 - 1), version = line.substr(sp2 + 1);
  if (!is_token(method)) return fail(400, "Malformed request method " + quoted(method));
  request_ = ParsedRequest{};
  request_.method = std::string(method);
  if (target.size() > limits_.max_target_bytes)
    return fail(414, "Request target of " + std::to_string(target.size()) + " bytes is longer than " + std::to_string(limits_.max_target_bytes));
  // Visible ASCII only (RFC 9112 3.2): other bytes travel percent-encoded.
  if (target.empty() || std::any_of(target.begin(), target.end(), [](unsigned char c) { return c < 0x21 || c >= 0x7f; }))
    return fail(400, "Malformed request target: only visible ASCII is allowed (percent-encode other bytes)");
  request_.target = std::string(target);
  // A client's mistake, not the server's: 400 rather than 505 (no 5xx answers client input).
  if (version != "HTTP/1.1" && version != "HTTP/1.0") return fail(400, "HTTP version " + quoted(version) + " is not supported (HTTP/1.1 is)");
  request_.version = std::string(version);

  std::string content_length, transfer_encoding, connection;
  bool has_length = false;
  expect_continue_ = false;
  while (pos < head_len) {
    const size_t next = line_end(buffer_, pos, line);
    pos = next;
    if (line.empty()) break;
    if (line.front() == ' ' || line.front() == '\t') return fail(400, "Folded header lines are not allowed (RFC 9112 5.2)");
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos || !is_token(line.substr(0, colon)))
      return fail(400, "Malformed header line " + quoted(line));
    if (request_.headers.size() >= limits_.max_header_count)
      return fail(431, "More than " + std::to_string(limits_.max_header_count) + " request headers");
    const std::string name(line.substr(0, colon));
    const std::string_view value = trim(line.substr(colon + 1));
    if (std::any_of(value.begin(), value.end(), [](unsigned char c) { return (c < 0x20 && c != '\t') || c == 0x7f; }))
      return fail(400, "Control character in header " + quoted(name));
    const std::string key = lower(name);
    if (key == "content-length") {
      // Digits only; a repeated header must repeat the same value (RFC 9110 8.6).
      if (value.empty() || value.size() > 18 || !std::all_of(value.begin(), value.end(), [](unsigned char c) { return std::isdigit(c); }))
        return fail(400, "Content-Length must be a non-negative integer, got " + quoted(value));
      if (has_length && content_length != value) return fail(400, "Conflicting Content-Length headers");
      content_length = std::string(value);
      has_length = true;
    } else if (key == "transfer-encoding") {
      transfer_encoding += (transfer_encoding.empty() ? "" : ",") + lower(value);
    } else if (key == "connection") {
      connection += "," + lower(value);
    } else if (key == "expect") {
      if (lower(value) != "100-continue") return fail(417, "Expect " + quoted(value) + " is not supported (only 100-continue)");
      expect_continue_ = true;
    }
    request_.headers.emplace_back(name, std::string(value));
  }
  buffer_.erase(0, head_len);

  request_.keep_alive = request_.version == "HTTP/1.1" ? connection.find("close") == std::string::npos
                                                       : connection.find("keep-alive") != std::string::npos;
  if (!transfer_encoding.empty()) {
    // Both framings at once is how requests are smuggled past proxies: refuse (RFC 9112 6.1).
    if (has_length) return fail(400, "Both Content-Length and Transfer-Encoding were sent");
    if (trim(transfer_encoding) != "chunked") return fail(400, "Transfer-Encoding " + quoted(transfer_encoding) + " is not supported (chunked is)");
    request_.chunked = true;
    chunk_left_ = 0;
    in_chunk_data_ = in_trailers_ = false;
  } else {
    body_length_ = has_length ? std::stoull(content_length) : 0;
    if (body_length_ > limits_.max_body_bytes)
      return fail(413, "Request body of " + content_length + " bytes exceeds the limit of " + std::to_string(limits_.max_body_bytes) +
                           " bytes (gateway.max_request_bytes)");
  }
  continue_sent_ = false;
  return state_ = State::kBody;
}

RequestReader::State RequestReader::parse_body() {
  if (request_.chunked) return parse_chunks();
  const size_t due = body_length_ - request_.body.size();
  const size_t n = std::min(due, buffer_.size());
  request_.body.append(buffer_, 0, n);
  buffer_.erase(0, n);
  if (request_.body.size() == body_length_) state_ = State::kReady;
  return state_;
}

RequestReader::State RequestReader::parse_chunks() {
  while (true) {
    if (in_chunk_data_) {
      const size_t n = std::min(chunk_left_, buffer_.size());
      request_.body.append(buffer_, 0, n);
      buffer_.erase(0, n);
      chunk_left_ -= n;
      if (chunk_left_ > 0) return state_;
      // The chunk's data ends with CRLF.
      if (buffer_.empty() || (buffer_[0] == '\r' && buffer_.size() < 2)) return state_;
      if (buffer_[0] == '\n') buffer_.erase(0, 1);
      else if (buffer_[0] == '\r' && buffer_[1] == '\n') buffer_.erase(0, 2);
      else return fail(400, "Malformed chunked body: chunk data not followed by CRLF");
      in_chunk_data_ = false;
    }
    std::string_view line;
    const size_t next = line_end(buffer_, 0, line);
    if (next == std::string::npos) {
      if (buffer_.size() > 4096) return fail(400, "Malformed chunked body: a chunk-size or trailer line longer than 4096 bytes");
      return state_;
    }
    if (in_trailers_) {
      // Trailer fields are read and dropped; an empty line ends the body.
      buffer_.erase(0, next);
      if (line.empty()) return state_ = State::kReady;
      continue;
    }
    std::string_view size_text = line.substr(0, line.find(';'));  // chunk extensions are ignored
    size_text = trim(size_text);
    if (size_text.empty() || size_text.size() > 15 || !std::all_of(size_text.begin(), size_text.end(), [](unsigned char c) { return std::isxdigit(c); }))
      return fail(400, "Malformed chunked body: chunk size " + quoted(size_text));
    const size_t size = std::stoull(std::string(size_text), nullptr, 16);
    buffer_.erase(0, next);
    if (size == 0) {
      in_trailers_ = true;
      continue;
    }
    if (size > limits_.max_body_bytes || request_.body.size() > limits_.max_body_bytes - size)
      return fail(413, "Request body exceeds the limit of " + std::to_string(limits_.max_body_bytes) + " bytes (gateway.max_request_bytes)");
    chunk_left_ = size;
    in_chunk_data_ = true;
  }
}

ParsedRequest RequestReader::take() {
  ParsedRequest out = std::move(request_);
  request_ = ParsedRequest{};
  body_length_ = 0;
  state_ = State::kIdle;
  return out;
}

}  // namespace areal::gateway::server
