#include "core/recorder/trajectory.hpp"

#include <algorithm>

#include "core/plugin_host/error.hpp"

namespace areal::recorder {

int64_t TrajectoryRow::oldest_version() const {
  int64_t oldest = -1;
  for (size_t t = 0; t < versions.size(); ++t)
    if (loss_mask[t] && versions[t] >= 0) oldest = oldest < 0 ? versions[t] : std::min(oldest, versions[t]);
  return oldest;
}

int64_t TrajectoryRow::newest_version() const {
  int64_t newest = -1;
  for (size_t t = 0; t < versions.size(); ++t)
    if (loss_mask[t]) newest = std::max(newest, versions[t]);
  return newest;
}

size_t TrajectoryRow::sampled_tokens() const {
  return static_cast<size_t>(std::count_if(loss_mask.begin(), loss_mask.end(), [](int32_t m) { return m != 0; }));
}

ExportStyle export_style_from(const std::string& name) {
  if (name == "individual") return ExportStyle::kIndividual;
  if (name == "concat") return ExportStyle::kConcat;
  throw Error(AREAL_CODE_INVALID_ARGUMENT, "style must be 'individual' or 'concat', got '" + name + "'");
}

const char* export_style_name(ExportStyle style) { return style == ExportStyle::kConcat ? "concat" : "individual"; }

nlohmann::ordered_json SessionTrajectory::to_json() const {
  nlohmann::ordered_json rows_json = nlohmann::ordered_json::array();
  for (const auto& r : rows) {
    nlohmann::ordered_json row = {{"interaction_id", r.interaction_id},
                                  {"input_ids", r.input_ids},
                                  {"loss_mask", r.loss_mask},
                                  {"logprobs", r.logprobs},
                                  {"versions", r.versions},
                                  {"reward", r.reward},
                                  {"turns", r.turns}};
    if (!r.routing.empty()) row["routed_experts"] = routing_json(r.routing);
    rows_json.push_back(std::move(row));
  }
  return {{"session_id", session_id},   {"task_id", task_id},   {"group_id", group_id},
          {"end_reason", end_reason},   {"style", export_style_name(style)},
          {"discount", discount},       {"skipped_incomplete", skipped_incomplete}, {"rows", rows_json}};
}

}  // namespace areal::recorder
