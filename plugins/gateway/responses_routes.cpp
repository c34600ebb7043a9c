#include "responses_routes.hpp"

#include <cstdint>
#include <stdexcept>
#include <exception>
#include <ostream>

#include "core/plugin_host/error.hpp"
#include "plugins/gateway/proxy/responses.hpp"
#include "api_call.hpp"
#include "http_error.hpp"
#include "request.hpp"
#include "stream_split.hpp"

namespace areal::gateway {
namespace {

using J = nlohmann::ordered_json;

}  // namespace

ResponsesRoutes::ResponsesRoutes(std::shared_ptr<proxy::ChatService> chat, SessionRoutes& sessions, proxy::SessionStore& store)
    : chat_(std::move(chat)), sessions_(sessions), store_(store) {}

J ResponsesRoutes::usage(const proxy::ChatService::Completed& c) const {
  const size_t in = c.gen.prompt_ids.size(), out = c.gen.output_ids.size();
  return {{"input_tokens", in},
          {"input_tokens_details", {{"cached_tokens", 0}}},
          {"output_tokens", out},
          {"output_tokens_details", {{"reasoning_tokens", proxy::reasoning_tokens(c, chat_->tokenizer())}}},
          {"total_tokens", in + out}};
}

bool ResponsesRoutes::handle(const std::string& path, Poco::Net::HTTPServerRequest& req, const std::string& raw_body,
                             Poco::Net::HTTPServerResponse& res) {
  if (path != "/responses" && path != "/v1/responses") return false;
  require_post(path, req, res);
  const auto session = calling_session(req, sessions_, store_);
  const J body = parse_json_object(raw_body, req.getContentType());
  require_chat(chat_, "responses");
  J history = nullptr;
  std::string continued_call;
  if (body.contains("previous_response_id") && !body["previous_response_id"].is_null()) {
    if (!body["previous_response_id"].is_string()) throw HttpError(400, "'previous_response_id' must be a string");
    StoredResponse prev = stored(body["previous_response_id"], session);
    history = std::move(prev.history);
    continued_call = prev.interaction_id;
  }
  proxy::ChatRequest r = proxy::responses_to_chat_request(body, history);
  note_request(r, "responses");
  // Continue the stored call's exact tokens when this conversation really
  // extends it (it does not if the instructions changed).
  int continues = -1;
  if (session && !continued_call.empty()) {
    const int index = session->record.index_of(continued_call);
    if (index >= 0 && session->record.find_parent(r.messages) == index) continues = index;
  }
  if (r.stream) {
    stream(r, body, session, continues, res);
    return true;
  }
  const auto done = chat_->run(r, session, proxy::new_call_id("resp_"), nullptr, continues);
  J obj = proxy::responses_object(done, r, body, r.model.empty() ? chat_->config().model_name : r.model, unix_seconds());
  obj["usage"] = usage(done);
  remember(done.id, body, r, done, session);
  send_json(res, 200, obj.dump());
  return true;
}

ResponsesRoutes::StoredResponse ResponsesRoutes::stored(const std::string& response_id, const std::shared_ptr<proxy::Session>& session) {
  std::lock_guard<std::mutex> lock(stored_mutex_);
  const auto it = stored_.find(response_id);
  if (it == stored_.end() || it->second.session_id != (session ? session->id : std::string()))
    throw HttpError(404, "Previous response with id '" + response_id + "' not found.", "previous_response_not_found");
  return it->second;
}

void ResponsesRoutes::remember(const std::string& response_id, const J& body, const proxy::ChatRequest& r,
                               const proxy::ChatService::Completed& done, const std::shared_ptr<proxy::Session>& session) {
  if (body.contains("store") && body["store"] == false) return;
  StoredResponse s;
  s.session_id = session ? session->id : std::string();
  s.interaction_id = done.id;
  s.history = r.messages;
  if (body.contains("instructions") && body["instructions"].is_string() && !s.history.empty()) s.history.erase(s.history.begin());
  s.history.push_back(done.message);
  std::lock_guard<std::mutex> lock(stored_mutex_);
  if (stored_.emplace(response_id, std::move(s)).second) stored_order_.push_back(response_id);
  while (stored_order_.size() > kMaxStored) {
    stored_.erase(stored_order_.front());
    stored_order_.pop_front();
  }
}

void ResponsesRoutes::stream(const proxy::ChatRequest& r, const J& body, const std::shared_ptr<proxy::Session>& session, int continues,
                             Poco::Net::HTTPServerResponse& res) {
  EventStream stream(res);
  int64_t seq = 0;
  auto send = [&](J event) {
    event["sequence_number"] = seq++;
    std::ostream& os = stream.out();
    os << "event: " << event["type"].get<std::string>() << "\ndata: " << event.dump(-1, ' ', false, J::error_handler_t::replace) << "\n\n";
    os.flush();
    if (!os) throw std::runtime_error("client disconnected");
  };
  const std::string model = r.model.empty() ? chat_->config().model_name : r.model;
  const int64_t created = unix_seconds();
  // The response id is the recorded call id, fixed before the call so the
  // stream's items and the final response's share their ids.
  const std::string resp_id = proxy::new_call_id("resp_");
  const std::string rs_id = proxy::response_item_id(resp_id, "rs"), msg_id = proxy::response_item_id(resp_id, "msg");
  J skeleton = {{"id", resp_id}, {"object", "response"}, {"created_at", created}, {"status", "in_progress"}, {"model", model},
                {"output", J::array()}, {"usage", nullptr}, {"error", nullptr}};
  int output_index = -1;
  std::string open;  // "reasoning" | "message"
  std::string reasoning_text, message_text;
  auto close_open = [&]() {
    if (open == "reasoning") {
      send({{"type", "response.reasoning_summary_text.done"}, {"item_id", rs_id}, {"output_index", output_index}, {"summary_index", 0}, {"text", reasoning_text}});
      send({{"type", "response.reasoning_summary_part.done"}, {"item_id", rs_id}, {"output_index", output_index}, {"summary_index", 0},
            {"part", {{"type", "summary_text"}, {"text", reasoning_text}}}});
      send({{"type", "response.output_item.done"}, {"output_index", output_index},
            {"item", {{"type", "reasoning"}, {"id", rs_id}, {"summary", J::array({{{"type", "summary_text"}, {"text", reasoning_text}}})}}}});
    } else if (open == "message") {
      const J part = {{"type", "output_text"}, {"text", message_text}, {"annotations", J::array()}};
      send({{"type", "response.output_text.done"}, {"item_id", msg_id}, {"output_index", output_index}, {"content_index", 0}, {"text", message_text}});
      send({{"type", "response.content_part.done"}, {"item_id", msg_id}, {"output_index", output_index}, {"content_index", 0}, {"part", part}});
      send({{"type", "response.output_item.done"}, {"output_index", output_index},
            {"item", {{"type", "message"}, {"id", msg_id}, {"status", "completed"}, {"role", "assistant"}, {"content", J::array({part})}}}});
    }
    open.clear();
  };
  auto open_item = [&](const std::string& kind) {
    if (open == kind) return;
    close_open();
    ++output_index;
    open = kind;
    if (kind == "reasoning") {
      send({{"type", "response.output_item.added"}, {"output_index", output_index}, {"item", {{"type", "reasoning"}, {"id", rs_id}, {"summary", J::array()}}}});
      send({{"type", "response.reasoning_summary_part.added"}, {"item_id", rs_id}, {"output_index", output_index}, {"summary_index", 0},
            {"part", {{"type", "summary_text"}, {"text", ""}}}});
    } else {
      send({{"type", "response.output_item.added"}, {"output_index", output_index},
            {"item", {{"type", "message"}, {"id", msg_id}, {"status", "in_progress"}, {"role", "assistant"}, {"content", J::array()}}}});
      send({{"type", "response.content_part.added"}, {"item_id", msg_id}, {"output_index", output_index}, {"content_index", 0},
            {"part", {{"type", "output_text"}, {"text", ""}, {"annotations", J::array()}}}});
    }
  };
  StreamSplitter splitter(chat_->parsers_for(r), r.tools_enabled());
  auto emit = [&](const std::string& raw_delta, bool final) {
    std::string reasoning, content;
    splitter.push(raw_delta, final, reasoning, content);
    if (!reasoning.empty()) {
      open_item("reasoning");
      reasoning_text += reasoning;
      send({{"type", "response.reasoning_summary_text.delta"}, {"item_id", rs_id}, {"output_index", output_index}, {"summary_index", 0}, {"delta", reasoning}});
    }
    if (!content.empty()) {
      open_item("message");
      message_text += content;
      send({{"type", "response.output_text.delta"}, {"item_id", msg_id}, {"output_index", output_index}, {"content_index", 0}, {"delta", content}});
    }
  };
  try {
    auto start = [&](size_t) {
      send({{"type", "response.created"}, {"response", skeleton}});
      send({{"type", "response.in_progress"}, {"response", skeleton}});
    };
    auto done = chat_->run(r, session, resp_id, [&](const std::string& delta) { emit(delta, false); }, continues, start);
    remember(resp_id, body, r, done, session);
    emit("", true);
    if (output_index < 0 && done.parsed.tool_calls.empty()) open_item("message");  // an empty reply is one empty message
    close_open();
    // The final object: its items carry the streamed ids (response_item_id).
    J output = J::array();
    for (const J& item : proxy::responses_output(done)) {
      if (item["type"] == "function_call") {
        ++output_index;
        J added = item;
        added["arguments"] = "";
        added["status"] = "in_progress";
        send({{"type", "response.output_item.added"}, {"output_index", output_index}, {"item", added}});
        send({{"type", "response.function_call_arguments.delta"}, {"item_id", item["id"]}, {"output_index", output_index}, {"delta", item["arguments"]}});
        send({{"type", "response.function_call_arguments.done"}, {"item_id", item["id"]}, {"output_index", output_index}, {"arguments", item["arguments"]}});
        send({{"type", "response.output_item.done"}, {"output_index", output_index}, {"item", item}});
      }
      output.push_back(item);
    }
    J final = proxy::responses_object(done, r, body, model, created);
    final["output"] = output;
    final["usage"] = usage(done);
    send({{"type", final["status"] == "completed" ? "response.completed" : "response.incomplete"}, {"response", final}});
  } catch (const Error& e) {
    if (!stream.started()) throw;  // nothing sent yet: the status line carries the error
    const int status = http_status_of(e);
    send({{"type", "error"}, {"code", error_code_for(status)}, {"message", e.what()}, {"param", nullptr}});
    throw StreamedError(status, e.what());
  } catch (const std::exception&) {
    // The client went away; the call is still recorded.
  }
}

}  // namespace areal::gateway
