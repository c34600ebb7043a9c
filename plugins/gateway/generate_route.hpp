// SGLang's native POST /generate (and PUT), as the seeds' Phase 3 calls it
// (RemoteSGLangEngine.agenerate): `text` or `input_ids` (one, or a batch),
// `sampling_params`, `return_logprob`, `rid`; the answer in SGLang's shape
// ({"text", "output_ids", "meta_info"}; a list for a batch). The prompt is
// sampled as given, without a chat template. Served to the admin key only and
// never recorded: sessions call the chat routes, which record. Fields it does
// not act on are accepted and listed in docs/http-api.md.
#pragma once

#include <memory>
#include <string>

#include <Poco/Net/HTTPServerRequest.h>
#include <Poco/Net/HTTPServerResponse.h>

#include "plugins/gateway/proxy/chat_service.hpp"
#include "session_routes.hpp"

namespace areal::gateway {

class GenerateRoute {
 public:
  GenerateRoute(std::shared_ptr<proxy::ChatService> chat, SessionRoutes& sessions, proxy::SessionStore& store)
      : chat_(std::move(chat)), sessions_(sessions), store_(store) {}

  bool handle(const std::string& path, Poco::Net::HTTPServerRequest& req, const std::string& body, Poco::Net::HTTPServerResponse& res);

 private:
  std::shared_ptr<proxy::ChatService> chat_;
  SessionRoutes& sessions_;
  proxy::SessionStore& store_;
};

}  // namespace areal::gateway
