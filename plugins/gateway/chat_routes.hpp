// OpenAI chat completions over HTTP: /chat/completions and
// /v1/chat/completions, JSON or true token streaming (SSE).
#pragma once

#include <memory>
#include <string>

#include <Poco/Net/HTTPServerRequest.h>
#include <Poco/Net/HTTPServerResponse.h>

#include "plugins/gateway/proxy/chat_service.hpp"
#include "session_routes.hpp"

namespace areal::gateway {

class ChatRoutes {
 public:
  // `chat` may be null: the gateway then has no tokenizer and answers 503.
  ChatRoutes(std::shared_ptr<proxy::ChatService> chat, SessionRoutes& sessions, proxy::SessionStore& store, size_t max_request_bytes);

  bool handle(const std::string& path, Poco::Net::HTTPServerRequest& req, const std::string& body, Poco::Net::HTTPServerResponse& res);

 private:
  void stream(const proxy::ChatRequest& r, const std::shared_ptr<proxy::Session>& session, Poco::Net::HTTPServerResponse& res);

  std::shared_ptr<proxy::ChatService> chat_;
  SessionRoutes& sessions_;
  proxy::SessionStore& store_;
  size_t max_request_bytes_;
};

}  // namespace areal::gateway
