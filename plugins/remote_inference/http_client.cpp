#include "http_client.hpp"

#include <sstream>
#include <stdexcept>
#include <cstdint>
#include <cstdlib>

#include <Poco/Net/HTTPRequest.h>
#include <Poco/Net/HTTPResponse.h>
#include <Poco/Timespan.h>
#include <nlohmann/json.hpp>

namespace areal::remote {

namespace {

Poco::Timespan span(double seconds) { return Poco::Timespan(static_cast<Poco::Timespan::TimeDiff>(seconds * 1e6)); }

Poco::Net::HTTPRequest make_request(const Url& url, const std::string& method, const std::string& path, const std::string& body) {
  Poco::Net::HTTPRequest req(method, url.prefix + path, Poco::Net::HTTPMessage::HTTP_1_1);
  req.setHost(url.host, url.port);
  req.set("Accept", "application/json, text/event-stream");
  if (method != Poco::Net::HTTPRequest::HTTP_GET) {
    req.setContentType("application/json");
    req.setContentLength(static_cast<std::streamsize>(body.size()));
  }
  return req;
}

}  // namespace

Url parse_url(const std::string& text) {
  const std::string scheme = "http://";
  if (text.rfind("https://", 0) == 0)
    throw std::invalid_argument("'" + text + "': https is not supported; reach the server over http (loopback or a private network)");
  if (text.rfind(scheme, 0) != 0) throw std::invalid_argument("'" + text + "' is not an http:// URL");
  Url u;
  u.text = text;
  while (!u.text.empty() && u.text.back() == '/') u.text.pop_back();
  std::string rest = u.text.substr(scheme.size());
  const size_t slash = rest.find('/');
  if (slash != std::string::npos) {
    u.prefix = rest.substr(slash);
    rest = rest.substr(0, slash);
  }
  const size_t colon = rest.rfind(':');
  if (colon == std::string::npos) {
    u.host = rest;
  } else {
    u.host = rest.substr(0, colon);
    const std::string port = rest.substr(colon + 1);
    char* end = nullptr;
    const long p = std::strtol(port.c_str(), &end, 10);
    if (port.empty() || *end != '\0' || p <= 0 || p > 65535) throw std::invalid_argument("'" + text + "' has a bad port");
    u.port = static_cast<uint16_t>(p);
  }
  if (u.host.empty()) throw std::invalid_argument("'" + text + "' has no host");
  return u;
}

HttpResult http_call(const Url& url, const std::string& method, const std::string& path, const std::string& body, double timeout_s) {
  Poco::Net::HTTPClientSession session(url.host, url.port);
  session.setTimeout(span(timeout_s));
  Poco::Net::HTTPRequest req = make_request(url, method, path, body);
  std::ostream& out = session.sendRequest(req);
  if (method != Poco::Net::HTTPRequest::HTTP_GET) out << body;
  Poco::Net::HTTPResponse resp;
  std::istream& in = session.receiveResponse(resp);
  HttpResult r;
  r.status = static_cast<int>(resp.getStatus());
  std::ostringstream ss;
  ss << in.rdbuf();
  r.body = ss.str();
  return r;
}

std::string error_message(const std::string& body) {
  const auto j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_object()) {
    if (j.contains("error") && j["error"].is_object() && j["error"].contains("message") && j["error"]["message"].is_string())
      return j["error"]["message"];
    if (j.contains("error") && j["error"].is_string()) return j["error"];
    if (j.contains("message") && j["message"].is_string()) return j["message"];
    if (j.contains("detail")) return j["detail"].is_string() ? j["detail"].get<std::string>() : j["detail"].dump();
  }
  return body.size() > 300 ? body.substr(0, 300) + "..." : body;
}

bool error_is_server_side(const std::string& body) {
  const auto j = nlohmann::json::parse(body, nullptr, false);
  if (!j.is_object() || !j.contains("error")) return false;
  const auto& e = j["error"];
  int status = 0;
  for (const char* key : {"code", "status_code"}) {
    if (!e.is_object() || !e.contains(key)) continue;
    if (e[key].is_number_integer()) status = e[key].get<int>();
    else if (e[key].is_string()) status = std::atoi(e[key].get<std::string>().c_str());
    if (status != 0) break;
  }
  return status >= 500 || status == 408 || status == 429;
}

StreamCall::StreamCall(const Url& url, double connect_timeout_s, double idle_timeout_s) : url_(url), session_(url.host, url.port) {
  session_.setTimeout(span(connect_timeout_s), span(idle_timeout_s), span(idle_timeout_s));
}

int StreamCall::post(const std::string& path, const std::string& body) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (cancelled_) throw std::runtime_error("cancelled");
  }
  Poco::Net::HTTPRequest req = make_request(url_, Poco::Net::HTTPRequest::HTTP_POST, path, body);
  std::ostream& out = session_.sendRequest(req);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    connected_ = true;
    if (cancelled_) throw std::runtime_error("cancelled");
  }
  out << body;
  Poco::Net::HTTPResponse resp;
  in_ = &session_.receiveResponse(resp);
  return static_cast<int>(resp.getStatus());
}

bool StreamCall::read_line(std::string& line) {
  if (in_ == nullptr || cancelled_) return false;
  if (!std::getline(*in_, line)) return false;
  if (!line.empty() && line.back() == '\r') line.pop_back();
  return !cancelled_;
}

std::string StreamCall::read_rest() {
  if (in_ == nullptr) return {};
  std::ostringstream ss;
  ss << in_->rdbuf();
  return ss.str();
}

void StreamCall::cancel() {
  std::lock_guard<std::mutex> lock(mutex_);
  cancelled_ = true;
  if (!connected_) return;
  try {
    session_.socket().shutdown();
  } catch (...) {  // already closed
  }
}

}  // namespace areal::remote
