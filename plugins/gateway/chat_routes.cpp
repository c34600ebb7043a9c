#include "chat_routes.hpp"

#include <chrono>

#include "areal/core/error.hpp"
#include "http_error.hpp"
#include "request.hpp"

namespace areal::gateway {
namespace {

using J = nlohmann::ordered_json;

int64_t now_s() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Length of the longest suffix of `s` that is a proper prefix of `tag`:
// text that may still turn out to be the tag, so it is held back.
size_t partial_tag(const std::string& s, const std::string& tag) {
  for (size_t n = std::min(s.size(), tag.size() - 1); n > 0; --n)
    if (s.compare(s.size() - n, n, tag, 0, n) == 0) return n;
  return 0;
}

// Splits raw streamed text into the reasoning and content that are safe to
// show so far (the same rules as proxy::parse_output, applied to a prefix).
struct StreamSplit {
  std::string reasoning, content;
};
StreamSplit split_so_far(const std::string& raw, bool reasoning_parser, bool tools, bool final) {
  StreamSplit out;
  std::string rest = raw;
  if (reasoning_parser) {
    const size_t lead = raw.find_first_not_of(" \t\r\n");
    const bool opened = lead != std::string::npos && raw.compare(lead, 7, "<think>") == 0;
    if (!opened && lead != std::string::npos && !final && std::string("<think>").compare(0, raw.size() - lead, raw, lead) == 0)
      return out;  // could still become "<think>"
    const size_t start = opened ? lead + 7 : 0;
    const size_t end = raw.find("</think>", start);
    if (opened && end == std::string::npos) {
      out.reasoning = raw.substr(start);
      if (!final) out.reasoning.resize(out.reasoning.size() - partial_tag(out.reasoning, "</think>"));
      return out;
    }
    if (end != std::string::npos) {
      out.reasoning = raw.substr(start, end - start);
      rest = raw.substr(end + 8);
    }
  }
  const size_t first = rest.find_first_not_of("\r\n");
  rest = first == std::string::npos ? std::string() : (out.reasoning.empty() ? rest : rest.substr(first));
  if (tools) {
    const size_t call = rest.find("<tool_call>");
    if (call != std::string::npos) rest.resize(call);
    else if (!final) rest.resize(rest.size() - partial_tag(rest, "<tool_call>"));
  }
  out.content = rest;
  return out;
}

}  // namespace

ChatRoutes::ChatRoutes(std::shared_ptr<proxy::ChatService> chat, SessionRoutes& sessions, proxy::SessionStore& store, size_t max_request_bytes)
    : chat_(std::move(chat)), sessions_(sessions), store_(store), max_request_bytes_(max_request_bytes) {}

bool ChatRoutes::handle(const std::string& path, Poco::Net::HTTPServerRequest& req, Poco::Net::HTTPServerResponse& res) {
  if (path != "/chat/completions" && path != "/v1/chat/completions") return false;
  if (req.getMethod() != "POST") {
    res.set("Allow", "POST");
    throw HttpError(405, "Method " + req.getMethod() + " is not allowed on " + path);
  }
  // The admin key may call the model without a session (nothing is recorded);
  // a session key records the call in its session.
  std::shared_ptr<proxy::Session> session;
  if (!store_.is_admin(bearer_token(req))) session = sessions_.session_of(req);
  const J body = read_json_object(req, max_request_bytes_);
  if (!chat_) throw HttpError(503, "This gateway has no tokenizer configured (gateway.tokenizer): it cannot serve chat completions");
  const proxy::ChatRequest r = proxy::parse_chat_request(body);
  if (r.stream) {
    stream(r, session, res);
    return true;
  }
  send_json(res, 200, chat_->complete(r, session).dump());
  return true;
}

void ChatRoutes::stream(const proxy::ChatRequest& r, const std::shared_ptr<proxy::Session>& session, Poco::Net::HTTPServerResponse& res) {
  res.setStatus(Poco::Net::HTTPResponse::HTTP_OK);
  res.setContentType("text/event-stream");
  res.set("Cache-Control", "no-cache");
  res.set("X-Accel-Buffering", "no");
  res.setChunkedTransferEncoding(true);
  std::ostream& os = res.send();
  const std::string id = "chatcmpl-" + proxy::random_hex(29);
  const std::string model = r.model.empty() ? chat_->config().model_name : r.model;
  const int64_t created = now_s();
  auto send = [&](const J& chunk) {
    os << "data: " << chunk.dump() << "\n\n";
    os.flush();
    if (!os) throw std::runtime_error("client disconnected");
  };
  auto chunk = [&](J delta, J finish) {
    return J{{"id", id}, {"object", "chat.completion.chunk"}, {"created", created}, {"model", model},
             {"choices", J::array({{{"index", 0}, {"delta", std::move(delta)}, {"logprobs", nullptr}, {"finish_reason", std::move(finish)}}})}};
  };
  const bool reasoning = chat_->config().parsers.reasoning_parser == "qwen3";
  const bool tools = !r.tools.is_null() && r.tool_choice != "none" && chat_->config().parsers.tool_call_parser != "none";
  std::string raw;
  size_t sent_reasoning = 0, sent_content = 0;
  auto emit = [&](bool final) {
    const StreamSplit s = split_so_far(raw, reasoning, tools, final);
    if (s.reasoning.size() > sent_reasoning) {
      send(chunk({{"reasoning_content", s.reasoning.substr(sent_reasoning)}}, nullptr));
      sent_reasoning = s.reasoning.size();
    }
    if (s.content.size() > sent_content) {
      send(chunk({{"content", s.content.substr(sent_content)}}, nullptr));
      sent_content = s.content.size();
    }
  };
  try {
    send(chunk({{"role", "assistant"}, {"content", ""}}, nullptr));
    auto done = chat_->run(r, session, [&](const std::string& delta) {
      raw += delta;
      emit(false);
    });
    emit(true);
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
    if (r.stream_usage) {
      J usage = chunk(J::object(), nullptr);
      usage["choices"] = J::array();
      usage["usage"] = chat_->usage(done);
      send(usage);
    }
    os << "data: [DONE]\n\n";
    os.flush();
  } catch (const Error& e) {
    // The status line is already sent: report in-band, as OpenAI does.
    const int status = http_status_for(e.code());
    os << "data: " << J{{"error", {{"message", e.what()}, {"type", error_type_for(status)}, {"param", nullptr}, {"code", error_code_for(status)}}}}.dump()
       << "\n\n";
    os.flush();
  } catch (const std::exception&) {
    // The client went away; the interaction was still recorded by run().
  }
}

}  // namespace areal::gateway
