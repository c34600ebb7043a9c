// What a recording yields for training: rows of tokens, each with its loss
// mask, behaviour log-probs, policy versions and discounted reward. The one
// row type of areal: the gateway exports it, episodes produce it, the
// trainer packs it, and it crosses the plugin ABI as plain arrays
// (trajectory_view.hpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/recorder/expert_routing.hpp"

namespace areal::recorder {

// Prompt tokens then sampled tokens (or a whole conversation, concat style),
// every per-token array as long as input_ids. Aligned, never shifted, so a
// version can never slip one position against the mask.
struct TrajectoryRow {
  std::string interaction_id;
  std::vector<int32_t> input_ids;
  std::vector<int32_t> loss_mask;  // 1 on sampled tokens
  std::vector<float> logprobs;     // behaviour log-probs; 0 on prompt tokens
  std::vector<int64_t> versions;   // policy version per sampled token; -1 on prompt tokens
  ExpertRouting routing;           // MoE: positions 0 .. len - 2 (Recorder::export_rows); empty if not recorded
  double reward = 0;               // discounted along the conversation
  uint32_t turns = 1;              // assistant turns in the row (concat rows: the chain length)

  // The oldest policy version among the sampled tokens (-1 if none).
  int64_t oldest_version() const;
  int64_t newest_version() const;  // the newest (-1 if none)
  size_t sampled_tokens() const;
};

enum class ExportStyle { kIndividual, kConcat };
ExportStyle export_style_from(const std::string& name);  // throws INVALID_ARGUMENT
const char* export_style_name(ExportStyle style);

// An ended session's (or episode's) rows with where they came from.
struct SessionTrajectory {
  std::string session_id, task_id, group_id, end_reason;
  ExportStyle style = ExportStyle::kIndividual;
  double discount = 1.0;
  size_t skipped_incomplete = 0;  // calls still in flight at export, not exported
  std::vector<TrajectoryRow> rows;

  // The export format of docs/http-api.md (/export_trajectories, JSONL files).
  nlohmann::ordered_json to_json() const;
};

}  // namespace areal::recorder
