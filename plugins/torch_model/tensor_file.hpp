// A safetensors entry as a torch tensor (a copy, converted to `dtype`):
// what model and adapter folders are read with. Floating types only; any
// other is INVALID_ARGUMENT naming the tensor.
#pragma once

#include <cstdint>

#include <torch/types.h>

#include "core/hf/model_files/safetensors.hpp"

namespace areal::torch_model {

torch::Tensor tensor_from_file(const model::TensorInfo& t, const uint8_t* data, torch::Dtype dtype);

}  // namespace areal::torch_model
