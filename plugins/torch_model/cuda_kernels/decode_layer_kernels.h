// areal's own CUDA kernels for the local engine's decode step, where a small
// model's step time follows its kernel count (a few microseconds each, even
// replayed from a CUDA graph) rather than the bytes it reads. Each replaces
// a run of libtorch kernels with one and rounds where they round, so its
// results are theirs up to the order of a float32 sum.
//
// Plain C++ over raw device pointers: no libtorch and no CUDA header here,
// so the torch side (decode_kernels.cpp) and the nvcc side compile apart.
// Every pointer is device memory; every stride counts elements.
#pragma once

#include <cstdint>

namespace areal::torch_model::cuda_kernels {

enum class Element { kBFloat16, kFloat16 };

// A decode layer's heads from its joined q|k|v projection to where attention
// reads them, in one kernel where eight ran (Qwen3): each q and k head
// RMS-normalized over the head (float32 sum; rounded, then scaled by its
// weight and rounded, as HF's Qwen3RMSNorm does), then rotated (RoPE:
// x * cos rounded, then + swapped(x) * signed sine, rounded once); the q
// heads written to `q_out`, the k heads and the untouched v heads into the
// caches at each row's (slot, position). Rows whose slot or position lies
// outside the cache write no key or value.
struct HeadsIntoCache {
  Element element = Element::kBFloat16;
  int64_t rows = 0, q_heads = 0, kv_heads = 0, head_dim = 0;  // head_dim even, at most kMaxHeadDim
  const void* qk = nullptr;                                   // [rows, q_heads + kv_heads, head_dim], heads contiguous in a row
  int64_t qk_row_stride = 0;
  const void* v = nullptr;  // [rows, kv_heads, head_dim], heads contiguous in a row
  int64_t v_row_stride = 0;
  const void* q_norm = nullptr;  // [head_dim] each; both null: no per-head norm (Llama, Qwen2)
  const void* k_norm = nullptr;
  float norm_eps = 0;
  const void* cos = nullptr;  // [rows, head_dim] each (rope_table's two halves)
  const void* sin = nullptr;  // the sine with its first half negated
  int64_t rope_row_stride = 0;
  void* q_out = nullptr;  // [rows, q_heads, head_dim], contiguous
  void* k_cache = nullptr;  // [slots, capacity, kv_heads, head_dim], the last two contiguous
  void* v_cache = nullptr;  // the same layout and strides as k_cache
  int64_t slots = 0, capacity = 0, cache_slot_stride = 0, cache_position_stride = 0;
  const int64_t* slot_of_row = nullptr;      // [rows]
  const int64_t* position_of_row = nullptr;  // [rows]
};
inline constexpr int64_t kMaxHeadDim = 512;

// silu(gate) * up, as libtorch's silu then multiply round it (silu rounded,
// then the product rounded): [rows, width] out, contiguous, from two
// [rows, width] operands read by row stride (the halves of a joined
// gate|up product).
struct SiluTimesUp {
  Element element = Element::kBFloat16;
  int64_t rows = 0, width = 0;
  const void* gate = nullptr;
  int64_t gate_row_stride = 0;
  const void* up = nullptr;
  int64_t up_row_stride = 0;
  void* out = nullptr;
};

// Queue the kernel on `stream` (a cudaStream_t; capturable into a CUDA
// graph): nullptr, or CUDA's message for why the launch failed.
const char* launch_heads_into_cache(const HeadsIntoCache& args, void* stream);
const char* launch_silu_times_up(const SiluTimesUp& args, void* stream);

}  // namespace areal::torch_model::cuda_kernels
