#include "core/plugin_host/gateway_sessions.hpp"

#include <exception>

#include "core/plugin_host/error.hpp"
#include "core/recorder/trajectory_view.hpp"
#include "core/plugin_host/string_writer.hpp"

namespace areal {

namespace {

areal_str str_of(const std::string& s) { return areal_str{s.data(), s.size()}; }

// Collects the one session a take_finished/export_session call delivers.
struct SessionCollector {
  std::optional<recorder::SessionTrajectory> session;
  std::string error;
  areal_trajectory_sink sink{AREAL_OFFSET_OF_END(areal_trajectory_sink, on_session), this, &SessionCollector::on_session};

  static void on_session(void* ctx, const areal_session_trajectory* view) {
    auto* self = static_cast<SessionCollector*>(ctx);
    try {
      if (view == nullptr) throw Error(AREAL_CODE_INVALID_ARGUMENT, "the gateway delivered a NULL session");
      self->session = recorder::copy_trajectory(*view);
    } catch (const std::exception& e) {
      self->error = e.what();
    }
  }
  recorder::SessionTrajectory take(const char* what) {
    if (!error.empty()) throw Error(AREAL_CODE_INTERNAL, std::string(what) + ": " + error);
    if (!session) throw Error(AREAL_CODE_INTERNAL, std::string(what) + ": the gateway returned without delivering the session");
    return std::move(*session);
  }
};

}  // namespace

bool GatewaySessions::supported(const areal_gateway_vtable* gateway) {
  return gateway != nullptr && gateway->struct_size >= AREAL_OFFSET_OF_END(areal_gateway_vtable, session_chat) &&
         gateway->grant_capacity != nullptr && gateway->start_session != nullptr && gateway->set_session_reward != nullptr &&
         gateway->end_session != nullptr && gateway->take_finished != nullptr && gateway->export_session != nullptr &&
         gateway->session_chat != nullptr;
}

GatewaySessions::GatewaySessions(const areal_gateway_vtable* gateway, void* self) : vt_(gateway), self_(self) {
  if (!supported(gateway))
    throw Error(AREAL_CODE_UNSUPPORTED, "the gateway has no session slots (ABI 1.4): it can serve agents over HTTP, but cannot hand "
                                        "sessions to the trainer in this process; rebuild it against ABI 1.4");
}

int64_t GatewaySessions::grant_capacity(int64_t n) {
  int64_t capacity = 0;
  throw_if_status(vt_->grant_capacity(self_, n, &capacity), "gateway grant_capacity");
  return capacity;
}

GatewaySessions::Started GatewaySessions::start(const std::string& task_id, const std::string& group_id) {
  StringCollector id, key;
  throw_if_status(vt_->start_session(self_, str_of(task_id), str_of(group_id), id.writer(), key.writer()), "gateway start_session");
  return {id.text, key.text};
}

void GatewaySessions::set_reward(const std::string& session_id, double reward, const std::string& interaction_id) {
  throw_if_status(vt_->set_session_reward(self_, str_of(session_id), str_of(interaction_id), reward), "gateway set_session_reward");
}

void GatewaySessions::end(const std::string& session_id) {
  throw_if_status(vt_->end_session(self_, str_of(session_id)), "gateway end_session");
}

std::optional<recorder::SessionTrajectory> GatewaySessions::take_finished(std::chrono::milliseconds timeout) {
  SessionCollector c;
  throw_if_status(vt_->take_finished(self_, timeout.count(), &c.sink), "gateway take_finished");
  if (!c.session && c.error.empty()) return std::nullopt;
  return c.take("gateway take_finished");
}

recorder::SessionTrajectory GatewaySessions::export_session(const std::string& session_id, double discount) {
  SessionCollector c;
  throw_if_status(vt_->export_session(self_, str_of(session_id), discount, &c.sink), "gateway export_session");
  return c.take("gateway export_session");
}

bool GatewaySessions::keeps_sessions_across_restarts() const {
  return vt_->struct_size >= AREAL_OFFSET_OF_END(areal_gateway_vtable, commit_checkpoint) && vt_->mark_sessions_trained != nullptr &&
         vt_->commit_checkpoint != nullptr;
}

void GatewaySessions::mark_trained(const std::vector<std::string>& session_ids, int64_t checkpoint_step) {
  if (session_ids.empty() || !keeps_sessions_across_restarts()) return;
  std::vector<areal_str> ids;
  ids.reserve(session_ids.size());
  for (const auto& id : session_ids) ids.push_back(str_of(id));
  throw_if_status(vt_->mark_sessions_trained(self_, ids.data(), ids.size(), checkpoint_step), "gateway mark_sessions_trained");
}

void GatewaySessions::commit_checkpoint(int64_t step) {
  if (!keeps_sessions_across_restarts()) return;
  throw_if_status(vt_->commit_checkpoint(self_, step), "gateway commit_checkpoint");
}

areal_status* GatewaySessions::chat(const std::string& session_id, areal_str request_json, const areal_writer* out) const {
  return vt_->session_chat(self_, str_of(session_id), request_json, out);
}

}  // namespace areal
