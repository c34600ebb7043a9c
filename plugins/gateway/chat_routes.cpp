#include "chat_routes.hpp"

#include <cstdint>
#include <stdexcept>
#include <exception>
#include <ostream>

#include "core/plugin_host/error.hpp"
#include "api_call.hpp"
#include "http_error.hpp"
#include "request.hpp"
#include "stream_split.hpp"

namespace areal::gateway {
namespace {

using J = nlohmann::ordered_json;

}  // namespace

ChatRoutes::ChatRoutes(std::shared_ptr<proxy::ChatService> chat, SessionRoutes& sessions, proxy::SessionStore& store, size_t max_request_bytes)
    : chat_(std::move(chat)), sessions_(sessions), store_(store), max_request_bytes_(max_request_bytes) {}

bool ChatRoutes::handle(const std::string& path, Poco::Net::HTTPServerRequest& req, const std::string& raw_body,
                        Poco::Net::HTTPServerResponse& res) {
  if (path != "/chat/completions" && path != "/v1/chat/completions") return false;
  require_post(path, req, res);
  const auto session = calling_session(req, sessions_, store_);
  const J body = parse_json_object(raw_body, req.getContentType());
  require_chat(chat_, "chat completions");
  const proxy::ChatRequest r = proxy::parse_chat_request(body);
  note_request(r, "chat");
  if (r.stream) {
    stream(r, session, res);
    return true;
  }
  send_json(res, 200, chat_->complete(r, session, proxy::new_call_id("chatcmpl-")).dump());
  return true;
}

void ChatRoutes::stream(const proxy::ChatRequest& r, const std::shared_ptr<proxy::Session>& session, Poco::Net::HTTPServerResponse& res) {
  EventStream stream(res);
  // One id for the stream; choice i is recorded as choice_call_id(id, i), as in complete().
  const std::string id = proxy::new_call_id("chatcmpl-");
  const std::string model = r.model.empty() ? chat_->config().model_name : r.model;
  const int64_t created = unix_seconds();
  auto send = [&](const J& chunk) {
    std::ostream& os = stream.out();
    os << "data: " << chunk.dump() << "\n\n";
    os.flush();
    if (!os) throw std::runtime_error("client disconnected");
  };
  int32_t choice = 0;
  auto chunk = [&](J delta, J finish) {
    return J{{"id", id}, {"object", "chat.completion.chunk"}, {"created", created}, {"model", model},
             {"choices", J::array({{{"index", choice}, {"delta", std::move(delta)}, {"logprobs", nullptr}, {"finish_reason", std::move(finish)}}})}};
  };
  size_t prompt_tokens = 0, completion_tokens = 0;
  try {
    // n > 1: the choices are generated one after another, each a call of its own.
    for (choice = 0; choice < r.n; ++choice) {
      StreamSplitter splitter(chat_->parsers_for(r), r.tools_enabled());
      auto emit = [&](const std::string& raw_delta, bool final) {
        std::string reasoning_delta, content_delta;
        splitter.push(raw_delta, final, reasoning_delta, content_delta);
        if (!reasoning_delta.empty()) send(chunk({{"reasoning_content", reasoning_delta}}, nullptr));
        if (!content_delta.empty()) send(chunk({{"content", content_delta}}, nullptr));
      };
      auto done = chat_->run(proxy::choice_request(r, choice), session, proxy::choice_call_id(id, choice),
                             [&](const std::string& delta) { emit(delta, false); }, -1,
                             [&](size_t) { send(chunk({{"role", "assistant"}, {"content", ""}}, nullptr)); });
      emit("", true);
      if (done.message.contains("tool_calls")) {
        J calls = J::array();
        size_t index = 0;
        for (const auto& c : done.message["tool_calls"]) {
          J call = c;
          call["index"] = index++;
          calls.push_back(call);
        }
        send(chunk({{"tool_calls", calls}}, nullptr));
      }
      J last = chunk(J::object(), done.finish_reason);
      if (r.logprobs) last["choices"][0]["logprobs"] = chat_->logprobs_json(done);
      send(last);
      prompt_tokens = done.gen.prompt_ids.size();
      completion_tokens += done.gen.output_ids.size();
    }
    if (r.stream_usage) {
      J usage = chunk(J::object(), nullptr);
      usage["choices"] = J::array();
      usage["usage"] = {{"prompt_tokens", prompt_tokens}, {"completion_tokens", completion_tokens}, {"total_tokens", prompt_tokens + completion_tokens}};
      send(usage);
    }
    stream.out() << "data: [DONE]\n\n";
    stream.out().flush();
  } catch (const Error& e) {
    if (!stream.started()) throw;  // nothing sent yet: the status line carries the error
    // The status line is already sent: report in-band, as OpenAI does, then the handler logs and counts it.
    const int status = http_status_of(e);
    stream.out() << "data: " << J{{"error", {{"message", e.what()}, {"type", error_type_for(status)}, {"param", nullptr}, {"code", error_code_for(status)}}}}.dump(-1, ' ', false, J::error_handler_t::replace)
                 << "\n\n";
    stream.out().flush();
    throw StreamedError(status, e.what());
  } catch (const std::exception&) {
    // The client went away; the interaction was still recorded by run().
  }
}

}  // namespace areal::gateway
