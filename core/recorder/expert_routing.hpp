// The experts a mixture-of-experts model routed each position of a call to,
// as the inference engine reported them (areal_routing, ABI 1.7): what
// routing replay hands the trainer so that its forward uses the rollout's
// experts (docs/algorithms.md, "Routing replay"). One uint16 per
// (position, MoE layer, slot); positions are those of prompt + output but
// the last token, which no forward routes for a log-prob.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "areal/inference.h"

namespace areal::recorder {

struct ExpertRouting {
  // A position whose experts were not recorded; the trainer's router picks them.
  static constexpr uint16_t kNotRecorded = 0xFFFF;

  uint32_t moe_layers = 0, top_k = 0, num_experts = 0;
  std::vector<uint16_t> experts;  // [positions][moe_layers][top_k]

  size_t per_position() const { return static_cast<size_t>(moe_layers) * top_k; }
  size_t positions() const { return per_position() == 0 ? 0 : experts.size() / per_position(); }
  bool empty() const { return experts.empty(); }
  bool same_shape(const ExpertRouting& o) const { return moe_layers == o.moe_layers && top_k == o.top_k && num_experts == o.num_experts; }
};

// Throws INVALID_ARGUMENT, naming `where`, for experts that do not fill the
// shape or name an expert >= num_experts (kNotRecorded aside).
void check_routing(const ExpertRouting& r, const std::string& where);

// A copy of the engine's report. Throws INVALID_ARGUMENT for one whose
// experts do not fill its shape or name an expert >= num_experts.
ExpertRouting copy_routing(const areal_routing& r);
// A borrowed view for the ABI (valid while `r` lives unchanged).
areal_routing routing_view(const ExpertRouting& r);

// The state DB's blob: moe_layers, top_k, num_experts (uint32 each), then
// the experts, little endian. Empty routing <-> empty blob.
std::string routing_blob(const ExpertRouting& r);
ExpertRouting routing_from_blob(std::string_view blob);  // throws INVALID_ARGUMENT

// The export's "routed_experts" (docs/http-api.md): {"moe_layers", "top_k",
// "num_experts", "positions", "dtype", "data"}, data the base64 of the
// [positions, moe_layers, top_k] array in dtype "uint8" when num_experts
// < 255 (255 marks a position not recorded) else "uint16" (65535 does),
// little endian, as vLLM returns routed experts.
nlohmann::ordered_json routing_json(const ExpertRouting& r);
ExpertRouting routing_from_json(const nlohmann::json& j);  // throws INVALID_ARGUMENT

}  // namespace areal::recorder
