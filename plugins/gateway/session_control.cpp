#include "session_control.hpp"
#include "core/text/json_depth.hpp"

#include <chrono>
#include <cmath>
#include <cstdint>
#include <algorithm>
#include <exception>

#include "core/plugin_host/error.hpp"
#include "core/recorder/trajectory_view.hpp"

namespace areal::gateway {

int64_t SessionControl::grant_capacity(int64_t n) {
  if (n < 1) throw Error(AREAL_CODE_INVALID_ARGUMENT, "grant_capacity needs n >= 1");
  return store_.grant_capacity(n);
}

std::pair<std::string, std::string> SessionControl::start_session(std::string_view task_id, std::string_view group_id) {
  auto started = store_.start(std::string(task_id), "", std::string(group_id));
  return {started.session->id, started.session->api_key};
}

void SessionControl::set_session_reward(std::string_view session_id, std::string_view interaction_id, double reward) {
  if (!std::isfinite(reward)) throw Error(AREAL_CODE_INVALID_ARGUMENT, "reward must be a finite number");
  store_.find(std::string(session_id))->record.set_reward(std::string(interaction_id), reward);
}

void SessionControl::end_session(std::string_view session_id) { store_.end(store_.find(std::string(session_id))); }

void SessionControl::deliver(const recorder::SessionTrajectory& t, const areal_trajectory_sink& sink) {
  routes_.append_jsonl(t.to_json());
  const recorder::TrajectoryView view(t);
  sink.on_session(sink.ctx, view.get());
}

void SessionControl::take_finished(int64_t timeout_ms, const areal_trajectory_sink& sink) {
  const auto& s = routes_.settings();
  auto exported = store_.take_finished(std::chrono::milliseconds(std::max<int64_t>(0, timeout_ms)), s.turn_discount,
                                       recorder::export_style_from(s.export_style));
  if (exported) deliver(*exported, sink);
}

void SessionControl::export_session(std::string_view session_id, double discount, const areal_trajectory_sink& sink) {
  deliver(store_.export_session(std::string(session_id), discount, recorder::export_style_from(routes_.settings().export_style)), sink);
}

std::string SessionControl::session_chat(std::string_view session_id, std::string_view request_json) {
  if (!chat_) throw Error(AREAL_CODE_UNSUPPORTED, "chat needs gateway.tokenizer (no chat template is loaded)");
  auto session = store_.find(std::string(session_id));
  if (session->finished()) throw Error(AREAL_CODE_FAILED_PRECONDITION, "session " + session->id + " already ended");
  nlohmann::ordered_json request;
  try {
    request = areal::text::parse_json_bounded<nlohmann::ordered_json>(request_json);
  } catch (const std::exception& e) {
    throw Error(AREAL_CODE_INVALID_ARGUMENT, std::string("chat: request is not JSON: ") + e.what());
  }
  if (!request.is_object()) throw Error(AREAL_CODE_INVALID_ARGUMENT, "chat: the request must be an OpenAI chat completion request object");
  const proxy::ChatRequest r = proxy::parse_chat_request(request);
  if (r.stream) throw Error(AREAL_CODE_INVALID_ARGUMENT, "chat does not stream in process; leave 'stream' unset");
  session->touch();
  return chat_->complete(r, session, proxy::new_call_id("chatcmpl-")).dump();
}

}  // namespace areal::gateway
