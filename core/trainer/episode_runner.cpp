#include "core/trainer/episode_runner.hpp"

#include <cstdint>
#include <exception>

#include "core/plugin_host/error.hpp"
#include "core/recorder/episode_recorder.hpp"
#include "core/plugin_host/string_writer.hpp"

namespace areal::trainer {

EpisodeOutcome run_episode(const EpisodeTarget& target, const std::string& episode_id, const std::string& data_json,
                           uint64_t seed, const std::string& group_id) {
  EpisodeRecorder rec(episode_id, target.inference, target.inference_self, seed, target.record_routing);
  EpisodeOutcome out;
  GatewaySessions* const gateway = target.gateway;
  GatewaySessions::Started session;
  if (gateway != nullptr) {
    try {
      session = gateway->start(episode_id, group_id.empty() ? episode_id : group_id);
      rec.attach_session(gateway, session.session_id);
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
  ep.api_key = areal_str{session.api_key.data(), session.api_key.size()};
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
    const auto reward = rec.apply_result(parsed, /*other_calls=*/gateway != nullptr);
    // The episode's reward also goes to the last call of its session, when
    // it made calls there and rewarded none itself.
    if (reward && gateway != nullptr && rec.record().size() == 0) gateway->set_reward(session.session_id, *reward);
    out.ok = true;
  } catch (const std::exception& e) {
    out.error = e.what();
  }
  out.rows = rec.record().export_rows(recorder::ExportStyle::kIndividual, target.turn_discount);
  out.rewards = rec.record().rewards();
  out.unrewarded = rec.record().unrewarded();
  out.record = rec.to_json();
  if (gateway != nullptr) {
    // Whatever happened, the session's calls are kept: end it and take it.
    try {
      try {
        gateway->end(session.session_id);
      } catch (const Error& e) {
        if (e.code() != AREAL_CODE_FAILED_PRECONDITION) throw;  // the agent ended it itself
      }
      recorder::SessionTrajectory t = gateway->export_session(session.session_id, target.turn_discount);
      out.record["session"] = t.to_json();
      if (!t.rows.empty()) out.rewards.push_back(t.rows.back().reward);
      for (auto& r : t.rows) out.rows.push_back(std::move(r));
    } catch (const std::exception& e) {
      if (out.ok) out.ok = false, out.error = std::string("could not export the episode's gateway session: ") + e.what();
    }
  }
  if (out.ok) out.record["result"] = parsed;
  out.record["status"] = out.ok ? "ok" : "error";
  if (!out.ok) out.record["error"] = out.error;
  return out;
}

}  // namespace areal::trainer
