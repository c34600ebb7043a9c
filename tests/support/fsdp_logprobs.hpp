// Log-probs of a packed batch from a fresh fsdp train plugin instance made
// with `config`: what the trainer's recomputation gives, through the ABI.
// Shared by the MoE tests and bench/model/routing_mismatch.cpp.
#pragma once

#include <memory>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/plugin_host/error.hpp"
#include "core/plugin_host/host_tensor.hpp"
#include "core/plugin_host/plugin_catalog.hpp"
#include "core/plugin_host/plugin_instance.hpp"

namespace areal::testing {

inline std::vector<float> fsdp_logprobs(areal::PluginCatalog& catalog, areal_services* services, const nlohmann::json& config,
                                        const areal_tensor_map* batch) {
  auto fsdp = catalog.resolve("fsdp", AREAL_KIND_TRAIN);
  areal::PluginInstance train(fsdp, config.dump(), services);
  DLManagedTensor* lp = nullptr;
  areal::throw_if_status(fsdp->train()->compute_logprobs(train.self(), batch, 1.0f, &lp), "compute_logprobs");
  std::vector<float> v(static_cast<const float*>(lp->dl_tensor.data), static_cast<const float*>(lp->dl_tensor.data) + lp->dl_tensor.shape[0]);
  lp->deleter(lp);
  return v;
}

}  // namespace areal::testing
