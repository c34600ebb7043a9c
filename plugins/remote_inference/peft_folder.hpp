// A LoRA adapter handed across the ABI in memory (load_adapter with
// "config" and tensors), written as the PEFT folder a remote server loads
// from disk: adapter_config.json + adapter_model.safetensors. No libtorch:
// the tensors are copied byte for byte in their own dtype.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "areal/tensors.h"

namespace areal::remote {

// Writes `dir` (created; replaced if it exists) from PEFT's adapter_config
// fields and the lora_A/lora_B tensors by PEFT's names. "peft_type" defaults
// to "LORA". Throws sdk::Error INVALID_ARGUMENT for a tensor that is not a
// contiguous 2-D float tensor in CPU memory or whose name is not a LoRA
// weight, naming it; the folder is then left absent.
void write_peft_folder(const std::string& dir, const nlohmann::json& config, const areal_tensor_map& tensors);

}  // namespace areal::remote
