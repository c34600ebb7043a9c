#include "session_control.hpp"

#include <chrono>
#include <cmath>

#include "areal/core/error.hpp"

namespace areal::gateway {

namespace {

using J = nlohmann::ordered_json;

std::string string_field(const J& req, const char* key, bool required) {
  if (!req.contains(key) || req[key].is_null()) {
    if (required) throw Error(AREAL_CODE_INVALID_ARGUMENT, std::string("control: '") + key + "' (a string) is required");
    return "";
  }
  if (!req[key].is_string()) throw Error(AREAL_CODE_INVALID_ARGUMENT, std::string("control: '") + key + "' must be a string");
  return req[key].get<std::string>();
}

}  // namespace

std::string SessionControl::handle(std::string_view request_json) {
  // Ops: grant_capacity, take_finished, start_session, set_reward, end_session,
  // export_session, chat (areal/gateway.h documents each).
  J req;
  try {
    req = J::parse(request_json);
  } catch (const std::exception& e) {
    throw Error(AREAL_CODE_INVALID_ARGUMENT, std::string("control: request is not JSON: ") + e.what());
  }
  if (!req.is_object()) throw Error(AREAL_CODE_INVALID_ARGUMENT, "control: request must be a JSON object");
  const std::string op = string_field(req, "op", true);
  if (op == "grant_capacity") {
    const int64_t n = req.value("n", int64_t{1});
    if (n < 1) throw Error(AREAL_CODE_INVALID_ARGUMENT, "control: grant_capacity needs n >= 1");
    return J{{"capacity", store_.grant_capacity(n)}}.dump();
  }
  if (op == "take_finished") {
    const int64_t ms = req.value("timeout_ms", int64_t{0});
    const auto& s = routes_.settings();
    auto exported = store_.take_finished(std::chrono::milliseconds(std::max<int64_t>(0, ms)), s.turn_discount,
                                         proxy::export_style_from(s.export_style));
    if (!exported) return J{{"session", nullptr}}.dump();
    J out = exported->to_json();
    routes_.append_jsonl(out);
    return J{{"session", out}}.dump();
  }
  if (op == "start_session") {
    auto started = store_.start(string_field(req, "task_id", true), string_field(req, "api_key", false),
                                string_field(req, "group_id", false));
    return J{{"session_id", started.session->id}, {"api_key", started.session->api_key}, {"group_id", started.session->group_id}}.dump();
  }
  if (op == "set_reward") {
    auto session = store_.find(string_field(req, "session_id", true));
    if (!req.contains("reward") || !req["reward"].is_number() || !std::isfinite(req["reward"].get<double>()))
      throw Error(AREAL_CODE_INVALID_ARGUMENT, "control: 'reward' must be a finite number");
    session->cache.set_reward(string_field(req, "interaction_id", false), req["reward"].get<double>());
    return "{}";
  }
  if (op == "export_session") {
    // One named session (the host's own episode), discounted as asked.
    const double discount = req.value("discount", routes_.settings().turn_discount);
    const std::string style = req.contains("style") ? string_field(req, "style", true) : routes_.settings().export_style;
    J out = store_.export_session(string_field(req, "session_id", true), discount, proxy::export_style_from(style)).to_json();
    routes_.append_jsonl(out);
    return out.dump();
  }
  if (op == "chat") {
    // An OpenAI chat completion for a session, in process (inline workflows).
    if (!chat_) throw Error(AREAL_CODE_UNSUPPORTED, "control: chat needs gateway.tokenizer (no chat template is loaded)");
    auto session = store_.find(string_field(req, "session_id", true));
    if (session->finished()) throw Error(AREAL_CODE_FAILED_PRECONDITION, "control: session " + session->id + " already ended");
    if (!req.contains("request") || !req["request"].is_object())
      throw Error(AREAL_CODE_INVALID_ARGUMENT, "control: chat needs 'request', an OpenAI chat completion request object");
    const proxy::ChatRequest r = proxy::parse_chat_request(req["request"]);
    if (r.stream) throw Error(AREAL_CODE_INVALID_ARGUMENT, "control: chat does not stream; leave 'stream' unset");
    session->touch();
    return chat_->complete(r, session).dump();
  }
  if (op == "end_session") {
    auto session = store_.find(string_field(req, "session_id", true));
    return J{{"interaction_count", store_.end(session)}}.dump();
  }
  throw Error(AREAL_CODE_UNSUPPORTED, "control: unknown op '" + op + "'");
}

}  // namespace areal::gateway
