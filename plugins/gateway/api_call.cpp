#include "api_call.hpp"

#include <chrono>

#include "http_error.hpp"
#include "request.hpp"

namespace areal::gateway {

void require_post(const std::string& path, Poco::Net::HTTPServerRequest& req, Poco::Net::HTTPServerResponse& res) {
  if (req.getMethod() == "POST") return;
  res.set("Allow", "POST");
  throw HttpError(405, "Method " + req.getMethod() + " is not allowed on " + path);
}

std::shared_ptr<proxy::Session> calling_session(const Poco::Net::HTTPServerRequest& req, SessionRoutes& sessions,
                                                const proxy::SessionStore& store) {
  if (store.is_admin(bearer_token(req))) return nullptr;
  return sessions.session_of(req);
}

void require_chat(const std::shared_ptr<proxy::ChatService>& chat, const std::string& what) {
  if (!chat) throw HttpError(503, "This gateway has no tokenizer configured (gateway.tokenizer): it cannot serve " + what);
}

std::ostream& start_event_stream(Poco::Net::HTTPServerResponse& res) {
  res.setStatus(Poco::Net::HTTPResponse::HTTP_OK);
  res.setContentType("text/event-stream");
  res.set("Cache-Control", "no-cache");
  res.set("X-Accel-Buffering", "no");  // tell reverse proxies not to buffer the stream
  res.setChunkedTransferEncoding(true);
  return res.send();
}

int64_t unix_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace areal::gateway
