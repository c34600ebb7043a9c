// OpenAI's Responses API over HTTP: /responses and /v1/responses, JSON or
// SSE with the Responses event sequence.
#pragma once

#include <memory>
#include <string>

#include <Poco/Net/HTTPServerRequest.h>
#include <Poco/Net/HTTPServerResponse.h>

#include "areal/core/proxy/chat_service.hpp"
#include "session_routes.hpp"

namespace areal::gateway {

class ResponsesRoutes {
 public:
  ResponsesRoutes(std::shared_ptr<proxy::ChatService> chat, SessionRoutes& sessions, proxy::SessionStore& store);
  bool handle(const std::string& path, Poco::Net::HTTPServerRequest& req, const std::string& body, Poco::Net::HTTPServerResponse& res);

 private:
  void stream(const proxy::ChatRequest& r, const nlohmann::ordered_json& body, const std::shared_ptr<proxy::Session>& session,
              Poco::Net::HTTPServerResponse& res);
  nlohmann::ordered_json usage(const proxy::ChatService::Completed& c) const;

  std::shared_ptr<proxy::ChatService> chat_;
  SessionRoutes& sessions_;
  proxy::SessionStore& store_;
};

}  // namespace areal::gateway
