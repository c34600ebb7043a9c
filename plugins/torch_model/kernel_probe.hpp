// Whether an optional kernel works on this device, asked once: a kernel
// that a build, a libtorch or a card may lack (or may compute wrongly) is
// tried on a tiny case before the model relies on it, and a failure costs
// speed, not correctness.
#pragma once

#include <cstdint>
#include <functional>

#include <torch/types.h>

namespace areal::torch_model {

// Runs `probe` once per (kernel, device, dtype, head_dim) and remembers
// whether it returned without throwing; the first refusal is printed once on
// stderr with the exception's reason. `kernel` must be a string literal (it
// is remembered by address); `device` as a tensor on it reports it (a CUDA
// device with its index). Call outside CUDA graph capture: a probe may
// read results on the host.
bool probed(const char* kernel, const torch::Device& device, torch::ScalarType dtype, const std::function<void()>& probe, int64_t head_dim = 0);

}  // namespace areal::torch_model
