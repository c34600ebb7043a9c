// From recorded rows (recorder/trajectory.hpp) to the packed batch the
// algorithm and train plugins read: rows back to back, cu_seqlens bounds,
// and a group id per row for the algorithm's group baselines.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/plugin_host/host_tensor.hpp"
#include "core/trainer/batch_slices.hpp"
#include "core/recorder/trajectory.hpp"

namespace areal::trainer {

using recorder::TrajectoryRow;

// Rows packed back to back (cu_seqlens bounds) as host tensors.
class PackedBatch {
 public:
  PackedBatch(int64_t policy_version, float temperature);
  PackedBatch(const PackedBatch&) = delete;
  PackedBatch& operator=(const PackedBatch&) = delete;

  // Appends a row of GRPO group `group_id`.
  void add(const TrajectoryRow& row, int64_t group_id);

  // Makes this (empty) batch the rows `part` of `whole`, with every field
  // `whole` has so far (proximal and reference log-probs, advantages,
  // routing): one PPO minibatch of a step.
  void assign_rows(const PackedBatch& whole, const BatchSlice& part);

  size_t rows() const { return rewards.values().size(); }
  size_t tokens() const { return input_ids.values().size(); }
  size_t loss_tokens() const;

  // The batch as a tensor map: the fields below, plus prox_logprobs,
  // ref_logprobs, advantages and routed_experts once set (non-empty).
  TensorMapBuilder map();

  HostTensor<int32_t> input_ids, cu_seqlens, loss_mask;
  HostTensor<float> logprobs;
  HostTensor<int64_t> versions;
  HostTensor<float> rewards;
  HostTensor<int64_t> group_ids;
  HostTensor<float> prox_logprobs;  // filled when the trainer recomputes
  HostTensor<float> ref_logprobs;   // filled when a reference model is configured
  HostTensor<float> advantages;     // filled by the algorithm
  // Mixture-of-experts rows with recorded routing: int16 [T, moe layers, k],
  // the experts each token's position was routed to in the rollout; -1
  // where not recorded (the row had none, or a row's last token). Empty
  // when no row of the batch has routing.
  HostTensor<int16_t> routed_experts;
  HostScalar<int64_t> policy_version;
  HostScalar<float> temperature;
  // The optimizer updates the whole run plans (0: not said, left out of the
  // map): a train plugin's LR schedule may take its length from it.
  HostScalar<int64_t> total_updates;

 private:
  void add_routing(const TrajectoryRow& row);  // after the row's tokens are in
  std::vector<int64_t> routing_shape_;         // {moe layers, k} of routed_experts
};

}  // namespace areal::trainer
