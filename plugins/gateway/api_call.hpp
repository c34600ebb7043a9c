// What every model-calling route (chat completions, responses, messages)
// does before and around a call: method check, who is calling, and the
// server-sent-events response.
#pragma once

#include <cstdint>
#include <memory>
#include <ostream>
#include <stdexcept>
#include <string>

#include <Poco/Net/HTTPServerRequest.h>
#include <Poco/Net/HTTPServerResponse.h>

#include "plugins/gateway/proxy/chat_service.hpp"
#include "session_routes.hpp"

namespace areal::gateway {

// 405 unless POST.
void require_post(const std::string& path, Poco::Net::HTTPServerRequest& req, Poco::Net::HTTPServerResponse& res);

// The caller's session: null for the admin key (served, not recorded), the
// key's session otherwise (401 / 410 from SessionRoutes::session_of).
std::shared_ptr<proxy::Session> calling_session(const Poco::Net::HTTPServerRequest& req, SessionRoutes& sessions,
                                                const proxy::SessionStore& store);

// 503 when the gateway has no tokenizer (chat is null).
void require_chat(const std::shared_ptr<proxy::ChatService>& chat, const std::string& what);

// Starts a 200 text/event-stream response and returns its body stream.
std::ostream& start_event_stream(Poco::Net::HTTPServerResponse& res);

// A stream's response, started at its first event: what fails before the
// first event (a template that refuses the messages, a prompt over the
// context) is still answered with its own 4xx status and body, as unstreamed.
class EventStream {
 public:
  explicit EventStream(Poco::Net::HTTPServerResponse& res) : res_(res) {}
  std::ostream& out() {
    if (os_ == nullptr) os_ = &start_event_stream(res_);
    return *os_;
  }
  bool started() const { return os_ != nullptr; }

 private:
  Poco::Net::HTTPServerResponse& res_;
  std::ostream* os_ = nullptr;
};

// An error reported inside a started stream (status 200 already sent): the
// handler logs and counts it under `status` and sends nothing more.
struct StreamedError : std::runtime_error {
  StreamedError(int status, const std::string& message) : std::runtime_error(message), status(status) {}
  int status;
};

// Unix seconds, for the `created` / `created_at` fields of API objects.
int64_t unix_seconds();

// Counts what a request sent that the gateway did not act on, by field name,
// on /metrics (areal_gateway_ignored_fields_total and
// areal_gateway_unknown_fields_total, labelled api and field), and logs each
// unknown field the first time it is seen.
void count_fields(const proxy::FieldNotes& notes, const char* api);

// Counts tool calls the parser recognised but could not read (left in the
// reply's content as text): areal_gateway_unreadable_tool_calls_total{parser}.
// The gateway installs it as ChatService's OutputParserConfig hook, so every
// route, streaming or not, counts through this one place.
void count_unreadable_tool_calls(const std::string& parser, size_t count);
// A call recorded without the MoE routing the gateway asked for (gateway.record_routing).
void count_unrouted_call();
// Messages changed for the chat template (proxy/template_messages.hpp):
// areal_gateway_template_rewrites_total{kind}, logged the first time of each kind.
void count_template_rewrite(const std::string& kind);

// A model-calling request about to be served: counts it
// (areal_gateway_model_requests_total{api}) and its fields.
void note_request(const proxy::ChatRequest& r, const char* api);

}  // namespace areal::gateway
