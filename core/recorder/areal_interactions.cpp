#include "core/recorder/areal_interactions.hpp"

#include <cstring>
#include <string>
#include <vector>
#include <cstdint>

#include "core/text/base64.hpp"

namespace areal::recorder {

namespace {

// AReaL's SerializedTensor: {"type": "tensor", "data": base64 of the raw
// buffer, "shape": [...], "dtype": "torch.<name>"}. x86 and ARM are little
// endian, as numpy.frombuffer on the reading side assumes.
template <typename T>
nlohmann::json serialized_tensor(const std::vector<T>& values, std::vector<size_t> shape, const char* dtype) {
  std::string bytes(values.size() * sizeof(T), '\0');
  if (!values.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
  return {{"type", "tensor"}, {"data", text::base64_encode(bytes)}, {"shape", shape}, {"dtype", dtype}};
}

}  // namespace

nlohmann::json areal_interactions(const SessionTrajectory& trajectory) {
  nlohmann::json out = nlohmann::json::object();
  for (const TrajectoryRow& row : trajectory.rows) {
    const size_t n = row.input_ids.size();
    // AReaL's to_tensor_dict: a batch dimension of 1; ids, mask and versions
    // int64, log-probs float32, an all-true bool attention mask, rewards [1].
    const std::vector<int64_t> ids(row.input_ids.begin(), row.input_ids.end());
    const std::vector<int64_t> mask(row.loss_mask.begin(), row.loss_mask.end());
    const std::vector<uint8_t> attention(n, 1);
    const std::vector<float> rewards{static_cast<float>(row.reward)};
    nlohmann::json tensors = {{"input_ids", serialized_tensor(ids, {1, n}, "torch.int64")},
                              {"loss_mask", serialized_tensor(mask, {1, n}, "torch.int64")},
                              {"logprobs", serialized_tensor(row.logprobs, {1, n}, "torch.float32")},
                              {"versions", serialized_tensor(row.versions, {1, n}, "torch.int64")},
                              {"attention_mask", serialized_tensor(attention, {1, n}, "torch.bool")},
                              {"rewards", serialized_tensor(rewards, {1}, "torch.float32")}};
    if (!row.routing.empty()) {
      // As AReaL's ModelResponse.routed_experts (SGLang's): int32
      // [prompt + completion - 1, layers * top_k], here with the batch
      // dimension; -1 where a position was not recorded.
      std::vector<int32_t> experts(row.routing.experts.size());
      for (size_t i = 0; i < experts.size(); ++i)
        experts[i] = row.routing.experts[i] == ExpertRouting::kNotRecorded ? -1 : row.routing.experts[i];
      tensors["routed_experts"] = serialized_tensor(experts, {1, row.routing.positions(), row.routing.per_position()}, "torch.int32");
    }
    out[row.interaction_id] = {{"tensor_dict", std::move(tensors)}, {"reward", row.reward}, {"interaction_id", row.interaction_id}};
  }
  return out;
}

}  // namespace areal::recorder
