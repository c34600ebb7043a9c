#include "areal/core/trainer/episode_runner.hpp"

#include "areal/core/error.hpp"
#include "areal/core/string_writer.hpp"

namespace areal::trainer {

EpisodeOutcome run_episode(const EpisodeTarget& target, const std::string& episode_id, const std::string& data_json,
                           uint64_t seed) {
  EpisodeRecorder rec(episode_id, target.inference, target.inference_self, seed);
  areal_episode ep{};
  ep.struct_size = AREAL_OFFSET_OF_END(areal_episode, api);
  ep.episode_id = areal_str{episode_id.data(), episode_id.size()};
  ep.data_json = areal_str{data_json.data(), data_json.size()};
  ep.base_url = areal_str{target.base_url.data(), target.base_url.size()};
  ep.api = rec.api();
  StringCollector result;
  EpisodeOutcome out;
  try {
    areal_status* st = nullptr;
    try {
      st = target.workflow->run_episode(target.workflow_self, &ep, result.writer());
    } catch (...) {
      throw Error(AREAL_CODE_INTERNAL, "run_episode threw a C++ exception across the C ABI (a plugin bug)");
    }
    throw_if_status(st, "workflow");
    nlohmann::json parsed;
    try {
      parsed = nlohmann::json::parse(result.text.empty() ? "{}" : result.text);
    } catch (const std::exception& e) {
      throw Error(AREAL_CODE_INVALID_ARGUMENT, std::string("workflow result is not JSON: ") + e.what());
    }
    rec.apply_result(parsed);
    out.record = rec.to_json();
    out.record["result"] = parsed;
    out.ok = true;
  } catch (const std::exception& e) {
    out.error = e.what();
    out.record = rec.to_json();  // whatever was generated is kept
  }
  out.record["status"] = out.ok ? "ok" : "error";
  if (!out.ok) out.record["error"] = out.error;
  out.completions = rec.completions();
  return out;
}

}  // namespace areal::trainer
