// Small HTTP helpers for the engine server: JSON bodies, JSON answers, and
// server-sent events written and flushed one by one.
#pragma once

#include <functional>
#include <map>
#include <ostream>
#include <string>

#include <Poco/Net/HTTPServerRequest.h>
#include <Poco/Net/HTTPServerResponse.h>
#include <nlohmann/json.hpp>

namespace areal::engine_server {

using Json = nlohmann::json;
using Request = Poco::Net::HTTPServerRequest;
using Response = Poco::Net::HTTPServerResponse;

// A client mistake: the route answers `status` with the protocol's error body.
struct HttpError {
  int status;
  std::string message;
};

// The request body parsed as a JSON object ({} when empty). Throws HttpError 400.
Json read_json(Request& req);
void send_json(Response& resp, int status, const Json& body);
void send_text(Response& resp, int status, const std::string& text);

class SseWriter {
 public:
  explicit SseWriter(Response& resp);
  // False once the client has gone (the write failed).
  bool event(const std::string& data);

 private:
  std::ostream* out_;
};

// Query parameters of the request URI.
std::map<std::string, std::string> query(const Request& req);
std::string path_of(const Request& req);

}  // namespace areal::engine_server
