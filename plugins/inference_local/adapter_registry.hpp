// The LoRA adapters the local engine serves beside its base model (ABI 1.6
// load_adapter / unload_adapter), by name. Requests name one
// (areal_gen_request.adapter); the engine adds each adapter's low-rank term
// to its own requests' rows of a mixed batch, so the base weights are never
// merged or copied, and many adapters share one base and one batch.
//
// Thread-safe: loads and unloads come from any thread, the scheduler reads
// between steps. A replaced adapter's old weights stay alive (shared_ptr)
// until no step uses them.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>
#include <torch/types.h>

#include "areal/tensors.h"
#include "core/hf/model_files/model_config.hpp"
#include "lora_adapter.hpp"

namespace areal::local_inference {

struct ServedAdapter {
  std::string name;
  std::shared_ptr<const torch_model::LoraAdapter> lora;
  int64_t version = 0;  // stamped on the tokens it generates
  std::string source;   // the folder it came from, or "memory"
};

class AdapterRegistry {
 public:
  AdapterRegistry(model::ModelConfig model, torch::Device device) : model_(std::move(model)), device_(device) {}

  // load_adapter's spec ({"name", "version", "path"} or {"name", "version",
  // "config"} with `tensors`; inference.h): reads and checks everything
  // first, then replaces the named adapter at once. Throws INVALID_ARGUMENT,
  // NOT_FOUND or UNSUPPORTED with the reason.
  void load(std::string_view spec_json, const areal_tensor_map* tensors);
  void unload(std::string_view name);  // NOT_FOUND when not loaded
  // The adapter of that name now; null when none.
  std::shared_ptr<const ServedAdapter> find(const std::string& name) const;
  // The adapter of requests that name none (loaded with "default": true:
  // a trainer's policy); empty when they get the base model.
  std::string default_name() const;
  // [{"name", "version", "rank", "alpha", "target_modules", "source", "default"}] for info.
  nlohmann::json describe() const;

 private:
  model::ModelConfig model_;
  torch::Device device_;
  mutable std::mutex mutex_;
  std::map<std::string, std::shared_ptr<const ServedAdapter>> adapters_;
  std::string default_;
};

}  // namespace areal::local_inference
