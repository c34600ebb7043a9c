// Anthropic's Messages API over HTTP: POST /v1/messages, JSON or SSE in
// Anthropic's event format. Errors on this path use Anthropic's body shape
// (see gateway_plugin.cpp).
#pragma once

#include <memory>
#include <string>

#include <Poco/Net/HTTPServerRequest.h>
#include <Poco/Net/HTTPServerResponse.h>

#include "plugins/gateway/proxy/chat_service.hpp"
#include "session_routes.hpp"

namespace areal::gateway {

class AnthropicRoutes {
 public:
  AnthropicRoutes(std::shared_ptr<proxy::ChatService> chat, SessionRoutes& sessions, proxy::SessionStore& store, size_t max_request_bytes);
  bool handle(const std::string& path, Poco::Net::HTTPServerRequest& req, const std::string& body, Poco::Net::HTTPServerResponse& res);

  // {"type": "error", "error": {"type": ..., "message": ...}}
  static std::string error_body(int status, const std::string& message);

 private:
  void stream(const proxy::ChatRequest& r, const std::shared_ptr<proxy::Session>& session, Poco::Net::HTTPServerResponse& res);

  std::shared_ptr<proxy::ChatService> chat_;
  SessionRoutes& sessions_;
  proxy::SessionStore& store_;
  size_t max_request_bytes_;
};

}  // namespace areal::gateway
