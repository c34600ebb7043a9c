// areal's own CUDA kernels for serving's decode step (cuda_kernels/), as
// tensor calls: each returns an undefined tensor where it does not apply,
// and the caller runs the libtorch ops it replaces. They apply on CUDA in
// bf16/fp16, in a build that compiled them (AREAL_HAS_CUDA_KERNELS: a
// CUDA libtorch and nvcc), once a probe on the device found them equal to
// their reference (written in libtorch ops, rounding where the model's
// path rounds) up to float32 summation order. Serving only: the trainer
// keeps libtorch's kernels, so its forward and its no-grad recompute are
// one computation.
//
// With AREAL_EMULATE_DECODE_KERNELS=1 in the environment (a test hook, read
// when decode_kernels_apply is asked), they apply on every device and
// dtype and compute their reference, so CPU tests run their callers' paths.
#pragma once

#include <cstdint>

#include <torch/types.h>

namespace areal::torch_model::fused {

// Whether both kernels apply to a model of this dtype and head size on
// `device` (probed once; outside CUDA graph capture).
bool decode_kernels_apply(const torch::Device& device, torch::ScalarType dtype, int64_t head_dim);

// A decode layer's heads from its q|k|v projection to attention's inputs:
// `qk` [S, H + kv, hd] (q's heads, then k's; each row's heads contiguous)
// RMS-normalized over each head and scaled by `q_norm` / `k_norm` [hd]
// (Qwen3; both undefined: no norm), then rotated by `rope` (rope_table's
// [2, S, 1, hd]); q returned [S, H, hd], k and `v` [S, kv, hd] written into
// `k_cache` / `v_cache` [slots, capacity, kv, hd] at rows (slots[i],
// positions[i]) ([S] int64). Undefined where the kernel does not apply
// (nothing is then written).
torch::Tensor heads_into_cache(const torch::Tensor& qk, const torch::Tensor& v, const torch::Tensor& q_norm, const torch::Tensor& k_norm, double eps,
                               const torch::Tensor& rope, const torch::Tensor& k_cache, const torch::Tensor& v_cache, const torch::Tensor& slots,
                               const torch::Tensor& positions);
// The same in libtorch ops: the model's own path (decoder_model.cpp,
// norm_rows and apply_rope) and index_put_ into the caches.
torch::Tensor heads_into_cache_reference(const torch::Tensor& qk, const torch::Tensor& v, const torch::Tensor& q_norm, const torch::Tensor& k_norm,
                                         double eps, const torch::Tensor& rope, const torch::Tensor& k_cache, const torch::Tensor& v_cache,
                                         const torch::Tensor& slots, const torch::Tensor& positions);

// silu(gate) * up for [rows, width] operands whose rows may be strided (the
// halves of a joined gate|up product): [rows, width], or undefined where
// the kernel does not apply.
torch::Tensor silu_times_up(const torch::Tensor& gate, const torch::Tensor& up);
torch::Tensor silu_times_up_reference(const torch::Tensor& gate, const torch::Tensor& up);  // torch::silu(gate) * up

}  // namespace areal::torch_model::fused
