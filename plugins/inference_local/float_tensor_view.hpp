// A borrowed DLPack float tensor (CPU, or CUDA on a CUDA build) as a torch
// view of the same memory, no copy: how weights and adapters handed across
// the ABI are read before they are copied into the engine's own tensors.
#pragma once

#include <string>

#include <dlpack/dlpack.h>
#include <torch/types.h>

namespace areal::local_inference {

// Throws INVALID_ARGUMENT naming `what` for anything else than a contiguous
// float tensor (16, 32 or 64 bits, bfloat16 too) on the CPU or a CUDA device.
torch::Tensor float_tensor_view(const DLTensor& t, const std::string& what);

}  // namespace areal::local_inference
