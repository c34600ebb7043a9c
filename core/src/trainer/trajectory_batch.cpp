#include "areal/core/trainer/trajectory_batch.hpp"

#include <algorithm>

#include "areal/core/error.hpp"

namespace areal::trainer {

int64_t TrajectoryRow::oldest_version() const {
  int64_t oldest = -1;
  for (size_t t = 0; t < versions.size(); ++t)
    if (loss_mask[t] && versions[t] >= 0) oldest = oldest < 0 ? versions[t] : std::min(oldest, versions[t]);
  return oldest;
}

std::vector<TrajectoryRow> rows_from_episode(const std::string& episode_id, int64_t group_id,
                                             const std::vector<RecordedCompletion>& completions, double turn_discount,
                                             size_t* unrewarded) {
  std::vector<TrajectoryRow> rows(completions.size());
  double g = 0;
  for (size_t i = completions.size(); i-- > 0;) {
    const RecordedCompletion& c = completions[i];
    if (!c.reward && unrewarded) ++*unrewarded;
    g = g * turn_discount + c.reward.value_or(0.0);
    TrajectoryRow& r = rows[i];
    r.episode_id = episode_id;
    r.group_id = group_id;
    r.reward = g;
    const size_t P = c.input_ids.size(), O = c.output_ids.size();
    r.input_ids = c.input_ids;
    r.input_ids.insert(r.input_ids.end(), c.output_ids.begin(), c.output_ids.end());
    r.loss_mask.assign(P, 0);
    r.loss_mask.resize(P + O, 1);
    r.logprobs.assign(P, 0.0f);
    r.logprobs.insert(r.logprobs.end(), c.logprobs.begin(), c.logprobs.end());
    r.versions.assign(P, -1);
    r.versions.insert(r.versions.end(), c.versions.begin(), c.versions.end());
  }
  return rows;
}

std::vector<TrajectoryRow> rows_from_session(const nlohmann::json& session, int64_t group_id) {
  std::vector<TrajectoryRow> rows;
  const std::string sid = session.value("session_id", std::string());
  for (const auto& r : session.at("rows")) {
    TrajectoryRow row;
    row.episode_id = sid;
    row.group_id = group_id;
    row.input_ids = r.at("input_ids").get<std::vector<int32_t>>();
    row.loss_mask = r.at("loss_mask").get<std::vector<int32_t>>();
    row.logprobs = r.at("logprobs").get<std::vector<float>>();
    row.versions = r.at("versions").get<std::vector<int64_t>>();
    row.reward = r.value("reward", 0.0);
    const size_t n = row.input_ids.size();
    if (row.loss_mask.size() != n || row.logprobs.size() != n || row.versions.size() != n)
      throw Error(AREAL_CODE_INVALID_ARGUMENT, "session " + sid + ": a row's input_ids, loss_mask, logprobs and versions differ in length");
    rows.push_back(std::move(row));
  }
  return rows;
}

PackedBatch::PackedBatch(const std::vector<TrajectoryRow>& rows, int64_t version, float temp)
    : policy_version(version), temperature(temp) {
  auto& cu = cu_seqlens.values();
  cu.push_back(0);
  for (const auto& r : rows) {
    input_ids.values().insert(input_ids.values().end(), r.input_ids.begin(), r.input_ids.end());
    loss_mask.values().insert(loss_mask.values().end(), r.loss_mask.begin(), r.loss_mask.end());
    logprobs.values().insert(logprobs.values().end(), r.logprobs.begin(), r.logprobs.end());
    versions.values().insert(versions.values().end(), r.versions.begin(), r.versions.end());
    rewards.values().push_back(static_cast<float>(r.reward));
    group_ids.values().push_back(r.group_id);
    cu.push_back(static_cast<int32_t>(input_ids.values().size()));
  }
}

size_t PackedBatch::loss_tokens() const {
  return static_cast<size_t>(std::count_if(loss_mask.values().begin(), loss_mask.values().end(), [](int32_t m) { return m != 0; }));
}

TensorMapBuilder PackedBatch::map() {
  TensorMapBuilder b;
  b.add("input_ids", input_ids.dl()).add("cu_seqlens", cu_seqlens.dl()).add("loss_mask", loss_mask.dl());
  b.add("logprobs", logprobs.dl()).add("versions", versions.dl()).add("rewards", rewards.dl()).add("group_ids", group_ids.dl());
  b.add("policy_version", policy_version.dl()).add("temperature", temperature.dl());
  if (!prox_logprobs.values().empty()) b.add("prox_logprobs", prox_logprobs.dl());
  if (!ref_logprobs.values().empty()) b.add("ref_logprobs", ref_logprobs.dl());
  if (!advantages.values().empty()) b.add("advantages", advantages.dl());
  return b;
}

}  // namespace areal::trainer
