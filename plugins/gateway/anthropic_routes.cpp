#include "anthropic_routes.hpp"

#include <stdexcept>
#include <exception>
#include <ostream>

#include "core/plugin_host/error.hpp"
#include "plugins/gateway/proxy/anthropic.hpp"
#include "api_call.hpp"
#include "http_error.hpp"
#include "request.hpp"
#include "stream_split.hpp"

namespace areal::gateway {
namespace {

using J = nlohmann::ordered_json;

std::string anthropic_error_type(int status) {
  switch (status) {
    case 400:
    case 405:
    case 409:
    case 410:
    case 415:
    case 422: return "invalid_request_error";
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 413: return "request_too_large";
    case 429: return "rate_limit_error";
    case 503: return "overloaded_error";
    default: return "api_error";
  }
}

}  // namespace

std::string AnthropicRoutes::error_body(int status, const std::string& message) {
  return J{{"type", "error"}, {"error", {{"type", anthropic_error_type(status)}, {"message", message}}}}.dump(
      -1, ' ', false, J::error_handler_t::replace);  // never unsendable, whatever bytes the message quotes
}

AnthropicRoutes::AnthropicRoutes(std::shared_ptr<proxy::ChatService> chat, SessionRoutes& sessions, proxy::SessionStore& store,
                                 size_t max_request_bytes)
    : chat_(std::move(chat)), sessions_(sessions), store_(store), max_request_bytes_(max_request_bytes) {}

bool AnthropicRoutes::handle(const std::string& path, Poco::Net::HTTPServerRequest& req, const std::string& raw_body,
                             Poco::Net::HTTPServerResponse& res) {
  if (path != "/v1/messages" && path != "/v1/messages/count_tokens") return false;
  require_post(path, req, res);
  const auto session = calling_session(req, sessions_, store_);
  J body = parse_json_object(raw_body, req.getContentType());
  require_chat(chat_, "messages");
  if (path == "/v1/messages/count_tokens") {
    // The prompt as it would be served (template, tools, thinking switch); nothing is recorded.
    if (!body.contains("max_tokens")) body["max_tokens"] = 1;
    const proxy::ChatRequest r = proxy::anthropic_to_chat_request(body);
    count_fields(r.fields, "anthropic");
    send_json(res, 200, J{{"input_tokens", chat_->count_prompt_tokens(r)}}.dump());
    return true;
  }
  const proxy::ChatRequest r = proxy::anthropic_to_chat_request(body);
  note_request(r, "anthropic");
  if (r.stream) {
    stream(r, session, res);
    return true;
  }
  const auto done = chat_->run(r, session, proxy::new_call_id("msg_"), nullptr);
  send_json(res, 200, proxy::anthropic_message(done, r, r.model.empty() ? chat_->config().model_name : r.model).dump());
  return true;
}

void AnthropicRoutes::stream(const proxy::ChatRequest& r, const std::shared_ptr<proxy::Session>& session, Poco::Net::HTTPServerResponse& res) {
  EventStream stream(res);
  auto send = [&](const std::string& event, const J& data) {
    std::ostream& os = stream.out();
    os << "event: " << event << "\ndata: " << data.dump() << "\n\n";
    os.flush();
    if (!os) throw std::runtime_error("client disconnected");
  };
  const std::string model = r.model.empty() ? chat_->config().model_name : r.model;
  const std::string id = proxy::new_call_id("msg_");  // the message id is the recorded call id
  // Content blocks open lazily: thinking first (if any), then text.
  int index = -1;
  std::string open;  // type of the open block
  auto open_block = [&](const std::string& type) {
    if (open == type) return;
    if (!open.empty()) send("content_block_stop", {{"type", "content_block_stop"}, {"index", index}});
    ++index;
    open = type;
    const J block = type == "thinking" ? J{{"type", "thinking"}, {"thinking", ""}, {"signature", ""}} : J{{"type", "text"}, {"text", ""}};
    send("content_block_start", {{"type", "content_block_start"}, {"index", index}, {"content_block", block}});
  };
  StreamSplitter splitter(chat_->parsers_for(r), r.tools_enabled());
  auto emit = [&](const std::string& raw_delta, bool final) {
    std::string reasoning, content;
    splitter.push(raw_delta, final, reasoning, content);
    if (!reasoning.empty()) {
      open_block("thinking");
      send("content_block_delta", {{"type", "content_block_delta"}, {"index", index}, {"delta", {{"type", "thinking_delta"}, {"thinking", reasoning}}}});
    }
    if (!content.empty()) {
      open_block("text");
      send("content_block_delta", {{"type", "content_block_delta"}, {"index", index}, {"delta", {{"type", "text_delta"}, {"text", content}}}});
    }
  };
  try {
    // Sent once the prompt is built, so its usage counts the real input tokens (as Anthropic's does).
    auto start = [&](size_t prompt_tokens) {
      send("message_start", {{"type", "message_start"},
                             {"message", {{"id", id}, {"type", "message"}, {"role", "assistant"}, {"model", model}, {"content", J::array()},
                                          {"stop_reason", nullptr}, {"stop_sequence", nullptr},
                                          {"usage", {{"input_tokens", prompt_tokens}, {"output_tokens", 0}}}}}});
    };
    auto done = chat_->run(r, session, id, [&](const std::string& delta) { emit(delta, false); }, -1, start);
    emit("", true);
    if (open == "thinking") send("content_block_delta", {{"type", "content_block_delta"}, {"index", index}, {"delta", {{"type", "signature_delta"}, {"signature", ""}}}});
    if (index < 0 && done.parsed.tool_calls.empty()) open_block("text");  // an empty reply is one empty text block
    if (!open.empty()) send("content_block_stop", {{"type", "content_block_stop"}, {"index", index}});
    for (const auto& block : proxy::anthropic_content(done)) {
      if (block["type"] != "tool_use") continue;
      ++index;
      send("content_block_start", {{"type", "content_block_start"}, {"index", index},
                                   {"content_block", {{"type", "tool_use"}, {"id", block["id"]}, {"name", block["name"]}, {"input", J::object()}}}});
      send("content_block_delta", {{"type", "content_block_delta"}, {"index", index}, {"delta", {{"type", "input_json_delta"}, {"partial_json", block["input"].dump()}}}});
      send("content_block_stop", {{"type", "content_block_stop"}, {"index", index}});
    }
    send("message_delta", {{"type", "message_delta"},
                           {"delta", {{"stop_reason", proxy::anthropic_stop_reason(done, r)}, {"stop_sequence", proxy::anthropic_stop_sequence(done)}}},
                           {"usage", {{"input_tokens", done.gen.prompt_ids.size()}, {"output_tokens", done.gen.output_ids.size()}}}});
    send("message_stop", {{"type", "message_stop"}});
  } catch (const Error& e) {
    if (!stream.started()) throw;  // nothing sent yet: the status line carries the error
    const int status = http_status_of(e);
    stream.out() << "event: error\ndata: " << error_body(status, e.what()) << "\n\n";
    stream.out().flush();
    throw StreamedError(status, e.what());
  } catch (const std::exception&) {
    // The client went away; the call is still recorded.
  }
}

}  // namespace areal::gateway
