#include "core/trainer/trajectory_batch.hpp"

#include <algorithm>


namespace areal::trainer {

PackedBatch::PackedBatch(int64_t version, float temp) : policy_version(version), temperature(temp) {
  cu_seqlens.values().push_back(0);
}

void PackedBatch::add(const TrajectoryRow& r, int64_t group_id) {
  input_ids.values().insert(input_ids.values().end(), r.input_ids.begin(), r.input_ids.end());
  loss_mask.values().insert(loss_mask.values().end(), r.loss_mask.begin(), r.loss_mask.end());
  logprobs.values().insert(logprobs.values().end(), r.logprobs.begin(), r.logprobs.end());
  versions.values().insert(versions.values().end(), r.versions.begin(), r.versions.end());
  rewards.values().push_back(static_cast<float>(r.reward));
  group_ids.values().push_back(group_id);
  cu_seqlens.values().push_back(static_cast<int32_t>(input_ids.values().size()));
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
