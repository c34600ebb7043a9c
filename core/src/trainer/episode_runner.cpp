#include "areal/core/trainer/episode_runner.hpp"

#include "areal/core/error.hpp"
#include "areal/core/gateway_control.hpp"
#include "areal/core/string_writer.hpp"

namespace areal::trainer {

namespace {

nlohmann::json control(const EpisodeTarget& t, const nlohmann::json& request) {
  return call_gateway_control(*t.gateway, t.gateway_self, request);
}

}  // namespace

EpisodeOutcome run_episode(const EpisodeTarget& target, const std::string& episode_id, const std::string& data_json,
                           uint64_t seed, const std::string& group_id) {
  EpisodeRecorder rec(episode_id, target.inference, target.inference_self, seed);
  EpisodeOutcome out;
  std::string session_id, api_key;
  const bool sessions = target.gateway != nullptr && target.gateway->control != nullptr;
  if (sessions) {
    try {
      const auto s = control(target, {{"op", "start_session"}, {"task_id", episode_id}, {"group_id", group_id.empty() ? episode_id : group_id}});
      session_id = s.at("session_id").get<std::string>();
      api_key = s.at("api_key").get<std::string>();
      rec.attach_session(target.gateway, target.gateway_self, session_id);
    } catch (const std::exception& e) {
      out.error = std::string("could not start the episode's gateway session: ") + e.what();
      out.record = rec.to_json();
      out.record["status"] = "error";
      out.record["error"] = out.error;
      return out;
    }
  }
  areal_episode ep{};
  ep.struct_size = AREAL_OFFSET_OF_END(areal_episode, api);
  ep.episode_id = areal_str{episode_id.data(), episode_id.size()};
  ep.data_json = areal_str{data_json.data(), data_json.size()};
  ep.base_url = areal_str{target.base_url.data(), target.base_url.size()};
  ep.api_key = areal_str{api_key.data(), api_key.size()};
  ep.api = rec.api();
  StringCollector result;
  nlohmann::json parsed;
  try {
    areal_status* st = nullptr;
    try {
      st = target.workflow->run_episode(target.workflow_self, &ep, result.writer());
    } catch (...) {
      throw Error(AREAL_CODE_INTERNAL, "run_episode threw a C++ exception across the C ABI (a plugin bug)");
    }
    throw_if_status(st, "workflow");
    try {
      parsed = nlohmann::json::parse(result.text.empty() ? "{}" : result.text);
    } catch (const std::exception& e) {
      throw Error(AREAL_CODE_INVALID_ARGUMENT, std::string("workflow result is not JSON: ") + e.what());
    }
    const auto reward = rec.apply_result(parsed, /*other_calls=*/sessions);
    // The episode's reward also goes to the last call of its session, when
    // it made calls there and rewarded none itself.
    if (reward && sessions && rec.completion_count() == 0) control(target, {{"op", "set_reward"}, {"session_id", session_id}, {"reward", *reward}});
    out.ok = true;
  } catch (const std::exception& e) {
    out.error = e.what();
  }
  if (sessions) {
    // Whatever happened, the session's calls are kept: end it and take it.
    try {
      try {
        control(target, {{"op", "end_session"}, {"session_id", session_id}});
      } catch (const Error& e) {
        if (e.code() != AREAL_CODE_FAILED_PRECONDITION) throw;  // the agent ended it itself
      }
      out.session = control(target, {{"op", "export_session"}, {"session_id", session_id}, {"discount", target.session_discount}});
    } catch (const std::exception& e) {
      if (out.ok) out.ok = false, out.error = std::string("could not export the episode's gateway session: ") + e.what();
    }
  }
  out.record = rec.to_json();
  if (!out.session.is_null()) out.record["session"] = out.session;
  if (out.ok) out.record["result"] = parsed;
  out.record["status"] = out.ok ? "ok" : "error";
  if (!out.ok) out.record["error"] = out.error;
  out.completions = rec.completions();
  return out;
}

}  // namespace areal::trainer
