#include "core/trainer/trajectory_batch.hpp"

#include <algorithm>

#include "core/plugin_host/error.hpp"


namespace areal::trainer {

PackedBatch::PackedBatch(int64_t version, float temp) : policy_version(version), temperature(temp) {
  cu_seqlens.values().push_back(0);
}

void PackedBatch::add(const TrajectoryRow& r, int64_t group_id) {
  input_ids.values().insert(input_ids.values().end(), r.input_ids.begin(), r.input_ids.end());
  loss_mask.values().insert(loss_mask.values().end(), r.loss_mask.begin(), r.loss_mask.end());
  logprobs.values().insert(logprobs.values().end(), r.logprobs.begin(), r.logprobs.end());
  versions.values().insert(versions.values().end(), r.versions.begin(), r.versions.end());
  add_routing(r);
  rewards.values().push_back(static_cast<float>(r.reward));
  group_ids.values().push_back(group_id);
  cu_seqlens.values().push_back(static_cast<int32_t>(input_ids.values().size()));
}

void PackedBatch::add_routing(const TrajectoryRow& r) {
  auto& experts = routed_experts.values();
  const size_t before = input_ids.values().size() - r.input_ids.size();  // this row's first token
  if (r.routing.empty() && experts.empty()) return;
  if (!r.routing.empty()) {
    if (r.routing.positions() + 1 != r.input_ids.size() || r.routing.num_experts > 32767)
      throw Error(AREAL_CODE_INVALID_ARGUMENT, "a row's routing covers " + std::to_string(r.routing.positions()) + " positions of " +
                                                   std::to_string(r.input_ids.size()) + " tokens (" + std::to_string(r.routing.num_experts) +
                                                   " experts): it must cover all but the last, with at most 32767 experts");
    const std::vector<int64_t> inner = {r.routing.moe_layers, r.routing.top_k};
    if (experts.empty()) {
      routing_shape_ = inner;
      routed_experts.set_inner_shape(inner);
      experts.assign(before * r.routing.per_position(), -1);  // earlier rows had none
    } else if (routing_shape_ != inner) {
      throw Error(AREAL_CODE_INVALID_ARGUMENT, "rows of one batch were routed with different MoE shapes (" + std::to_string(routing_shape_[0]) + " x " +
                                                   std::to_string(routing_shape_[1]) + " and " + std::to_string(inner[0]) + " x " + std::to_string(inner[1]) + ")");
    }
  }
  const size_t per = static_cast<size_t>(routing_shape_[0] * routing_shape_[1]);
  for (const uint16_t e : r.routing.experts) experts.push_back(e == recorder::ExpertRouting::kNotRecorded ? int16_t{-1} : static_cast<int16_t>(e));
  experts.resize(input_ids.values().size() * per, -1);  // the last token, or a row without routing
}

namespace {

// values[first * per, end * per) of a field, or nothing when it is unset.
template <class T>
void copy_range(const HostTensor<T>& from, HostTensor<T>& to, int64_t first, int64_t end, size_t per = 1) {
  const auto& v = from.values();
  if (v.empty()) return;
  to.values().assign(v.begin() + static_cast<std::ptrdiff_t>(first * per), v.begin() + static_cast<std::ptrdiff_t>(end * per));
}

}  // namespace

void PackedBatch::assign_rows(const PackedBatch& whole, const BatchSlice& part) {
  if (rows() != 0 || part.first_sequence < 0 || part.end_sequence > static_cast<int64_t>(whole.rows()) || part.first_sequence > part.end_sequence)
    throw Error(AREAL_CODE_INTERNAL, "assign_rows: a slice outside the batch, or into a batch that has rows");
  total_updates.value() = whole.total_updates.value();
  const int64_t t0 = whole.cu_seqlens.values()[part.first_sequence], t1 = whole.cu_seqlens.values()[part.end_sequence];
  for (int64_t b = part.first_sequence + 1; b <= part.end_sequence; ++b) cu_seqlens.values().push_back(whole.cu_seqlens.values()[b] - t0);
  copy_range(whole.input_ids, input_ids, t0, t1);
  copy_range(whole.loss_mask, loss_mask, t0, t1);
  copy_range(whole.logprobs, logprobs, t0, t1);
  copy_range(whole.versions, versions, t0, t1);
  copy_range(whole.prox_logprobs, prox_logprobs, t0, t1);
  copy_range(whole.ref_logprobs, ref_logprobs, t0, t1);
  copy_range(whole.advantages, advantages, t0, t1);
  copy_range(whole.rewards, rewards, part.first_sequence, part.end_sequence);
  copy_range(whole.group_ids, group_ids, part.first_sequence, part.end_sequence);
  if (!whole.routed_experts.values().empty()) {
    routing_shape_ = whole.routing_shape_;
    copy_range(whole.routed_experts, routed_experts, t0, t1, static_cast<size_t>(routing_shape_[0] * routing_shape_[1]));
    routed_experts.set_inner_shape(routing_shape_);
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
  if (total_updates.value() > 0) b.add("total_updates", total_updates.dl());
  if (!prox_logprobs.values().empty()) b.add("prox_logprobs", prox_logprobs.dl());
  if (!ref_logprobs.values().empty()) b.add("ref_logprobs", ref_logprobs.dl());
  if (!advantages.values().empty()) b.add("advantages", advantages.dl());
  if (!routed_experts.values().empty()) b.add("routed_experts", routed_experts.dl());
  return b;
}

}  // namespace areal::trainer
