// The gateway's control slot (ABI 1.1): the trainer in the same process
// grants capacity, takes ended sessions' trajectories, and runs sessions for
// its own episodes, without HTTP and without the admin key (it holds the
// instance). Same semantics as the admin endpoints in session_routes.
#pragma once

#include <string>
#include <string_view>

#include <memory>

#include "areal/core/proxy/chat_service.hpp"
#include "areal/core/proxy/session_store.hpp"
#include "session_routes.hpp"

namespace areal::gateway {

class SessionControl {
 public:
  // `chat` may be null (no tokenizer configured): the chat op is then UNSUPPORTED.
  SessionControl(proxy::SessionStore& store, SessionRoutes& routes, std::shared_ptr<proxy::ChatService> chat)
      : store_(store), routes_(routes), chat_(std::move(chat)) {}

  // One request object in, one response object out (see areal/gateway.h).
  // Throws areal::Error: INVALID_ARGUMENT for a malformed request,
  // UNSUPPORTED for an unknown op, and the store's errors as they are.
  std::string handle(std::string_view request_json);

 private:
  proxy::SessionStore& store_;
  SessionRoutes& routes_;
  std::shared_ptr<proxy::ChatService> chat_;
};

}  // namespace areal::gateway
