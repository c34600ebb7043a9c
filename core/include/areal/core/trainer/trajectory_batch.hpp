// From recorded episodes to the packed batch the algorithm and train
// plugins read. One row per completion ("individual" export): prompt tokens
// then sampled tokens, loss on the sampled ones, behaviour log-probs and
// per-token policy versions aligned with the tokens they belong to (no
// shift, so versions can never slip one position against the mask).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "areal/core/episode_recorder.hpp"
#include "areal/core/host_tensor.hpp"

namespace areal::trainer {

struct TrajectoryRow {
  std::string episode_id;
  int64_t group_id = 0;
  std::vector<int32_t> input_ids;  // prompt + output
  std::vector<int32_t> loss_mask;  // 0 on the prompt, 1 on the output
  std::vector<float> logprobs;     // 0 on the prompt
  std::vector<int64_t> versions;   // -1 on the prompt
  double reward = 0;
  // The oldest policy version among the row's sampled tokens (-1 if none).
  int64_t oldest_version() const;
};

// Rows of one episode. Rewards are discounted backwards over the episode's
// completions in order (g = g * turn_discount + reward, a missing reward
// counting 0), AReaL's apply_reward_discount. *unrewarded (optional) counts
// completions that had no reward.
std::vector<TrajectoryRow> rows_from_episode(const std::string& episode_id, int64_t group_id,
                                             const std::vector<RecordedCompletion>& completions, double turn_discount,
                                             size_t* unrewarded = nullptr);

// Rows of an exported gateway session (the JSON /export_trajectories and
// the control slot's export give): one per row, with its reward as exported
// (already discounted by the gateway).
std::vector<TrajectoryRow> rows_from_session(const nlohmann::json& session, int64_t group_id);

// Rows packed back to back (cu_seqlens bounds) as host tensors.
class PackedBatch {
 public:
  PackedBatch(const std::vector<TrajectoryRow>& rows, int64_t policy_version, float temperature);
  PackedBatch(const PackedBatch&) = delete;
  PackedBatch& operator=(const PackedBatch&) = delete;

  size_t rows() const { return rewards.values().size(); }
  size_t tokens() const { return input_ids.values().size(); }
  size_t loss_tokens() const;

  // The batch as a tensor map: the fields below, plus prox_logprobs,
  // ref_logprobs and advantages once set (non-empty).
  TensorMapBuilder map();

  HostTensor<int32_t> input_ids, cu_seqlens, loss_mask;
  HostTensor<float> logprobs;
  HostTensor<int64_t> versions;
  HostTensor<float> rewards;
  HostTensor<int64_t> group_ids;
  HostTensor<float> prox_logprobs;  // filled when the trainer recomputes
  HostTensor<float> ref_logprobs;   // filled when a reference model is configured
  HostTensor<float> advantages;     // filled by the algorithm
  HostScalar<int64_t> policy_version;
  HostScalar<float> temperature;
};

}  // namespace areal::trainer
