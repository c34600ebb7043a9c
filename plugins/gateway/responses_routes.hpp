// OpenAI's Responses API over HTTP: /responses and /v1/responses, JSON or
// SSE with the Responses event sequence.
#pragma once

#include <deque>
#include <mutex>
#include <unordered_map>

#include <memory>
#include <string>

#include <Poco/Net/HTTPServerRequest.h>
#include <Poco/Net/HTTPServerResponse.h>

#include "plugins/gateway/proxy/chat_service.hpp"
#include "session_routes.hpp"

namespace areal::gateway {

class ResponsesRoutes {
 public:
  ResponsesRoutes(std::shared_ptr<proxy::ChatService> chat, SessionRoutes& sessions, proxy::SessionStore& store);
  bool handle(const std::string& path, Poco::Net::HTTPServerRequest& req, const std::string& body, Poco::Net::HTTPServerResponse& res);

 private:
  void stream(const proxy::ChatRequest& r, const nlohmann::ordered_json& body, const std::shared_ptr<proxy::Session>& session, int continues,
              Poco::Net::HTTPServerResponse& res);
  nlohmann::ordered_json usage(const proxy::ChatService::Completed& c) const;

  // Responses kept for previous_response_id (every one whose request did
  // not say store: false), the oldest dropped past kMaxStored.
  struct StoredResponse {
    std::string session_id;              // "" for calls with the admin key
    nlohmann::ordered_json history;      // its messages without its instructions, then its reply
    std::string interaction_id;          // the call in its session
  };
  static constexpr size_t kMaxStored = 8192;
  // The stored response a request continues (404 when unknown or of another session).
  StoredResponse stored(const std::string& response_id, const std::shared_ptr<proxy::Session>& session);
  void remember(const std::string& response_id, const nlohmann::ordered_json& body, const proxy::ChatRequest& r,
                const proxy::ChatService::Completed& done, const std::shared_ptr<proxy::Session>& session);
  std::mutex stored_mutex_;
  std::unordered_map<std::string, StoredResponse> stored_;
  std::deque<std::string> stored_order_;

  std::shared_ptr<proxy::ChatService> chat_;
  SessionRoutes& sessions_;
  proxy::SessionStore& store_;
};

}  // namespace areal::gateway
