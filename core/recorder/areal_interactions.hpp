// AReaL's own export format (areal.experimental.openai.proxy.server's
// serialize_interactions, facts in docs/http-api.md): interactions keyed by
// id, each a tensor dict of base64 little-endian buffers that AReaL's
// deserialize_interactions turns into InteractionWithTokenLogpReward. Lets
// AReaL's OpenAIProxyClient.export_interactions read our /export_trajectories.
#pragma once

#include <nlohmann/json.hpp>

#include "core/recorder/trajectory.hpp"

namespace areal::recorder {

// {"<interaction id>": {"tensor_dict": {input_ids, loss_mask, logprobs,
// versions, attention_mask, rewards}, "reward": r, "interaction_id": id}}
nlohmann::json areal_interactions(const SessionTrajectory& trajectory);

}  // namespace areal::recorder
