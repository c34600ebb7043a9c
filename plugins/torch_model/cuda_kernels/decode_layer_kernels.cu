#include "decode_layer_kernels.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

namespace areal::torch_model::cuda_kernels {
namespace {

constexpr int kWarp = 32;
constexpr int64_t kMaxBlocks = 2147483647;  // a grid's x dimension
// A warp holds one head: lane l keeps elements l, l + 32, ... of each half.
constexpr int kPerLane = static_cast<int>(kMaxHeadDim / 2 / kWarp);

template <typename T>
__device__ float to_float(T x);
template <>
__device__ float to_float(__nv_bfloat16 x) {
  return __bfloat162float(x);
}
template <>
__device__ float to_float(__half x) {
  return __half2float(x);
}
template <typename T>
__device__ T from_float(float x);
template <>
__device__ __nv_bfloat16 from_float(float x) {
  return __float2bfloat16_rn(x);
}
template <>
__device__ __half from_float(float x) {
  return __float2half_rn(x);
}
// A float rounded to the element type and back: where libtorch stores a
// half-precision intermediate, the kernel rounds it too.
template <typename T>
__device__ float rounded(float x) {
  return to_float(from_float<T>(x));
}

template <typename T>
__global__ void heads_into_cache_kernel(HeadsIntoCache a) {
  const int64_t heads = a.q_heads + 2 * a.kv_heads;
  const int64_t warp = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kWarp;
  const int lane = static_cast<int>(threadIdx.x % kWarp);
  if (warp >= a.rows * heads) return;  // warp-uniform: a warp's lanes share `warp`
  const int64_t row = warp / heads, head = warp % heads, hd = a.head_dim, half = hd / 2;
  const bool is_q = head < a.q_heads, is_v = head >= a.q_heads + a.kv_heads;

  T* dst;
  if (is_q) {
    dst = static_cast<T*>(a.q_out) + (row * a.q_heads + head) * hd;
  } else {
    const int64_t slot = a.slot_of_row[row], position = a.position_of_row[row];
    if (slot < 0 || slot >= a.slots || position < 0 || position >= a.capacity) return;  // warp-uniform too
    const int64_t kv_head = is_v ? head - a.q_heads - a.kv_heads : head - a.q_heads;
    dst = static_cast<T*>(is_v ? a.v_cache : a.k_cache) + slot * a.cache_slot_stride + position * a.cache_position_stride + kv_head * hd;
  }
  if (is_v) {
    const T* src = static_cast<const T*>(a.v) + row * a.v_row_stride + (head - a.q_heads - a.kv_heads) * hd;
    for (int64_t i = lane; i < hd; i += kWarp) dst[i] = src[i];
    return;
  }

  const T* src = static_cast<const T*>(a.qk) + row * a.qk_row_stride + head * hd;
  float lo[kPerLane], hi[kPerLane];  // elements j and j + half, j = lane + 32 t
  float squares = 0;
#pragma unroll
  for (int t = 0; t < kPerLane; ++t) {
    const int64_t j = lane + static_cast<int64_t>(t) * kWarp;
    lo[t] = j < half ? to_float(src[j]) : 0.f;
    hi[t] = j < half ? to_float(src[j + half]) : 0.f;
    squares += lo[t] * lo[t] + hi[t] * hi[t];
  }
  if (a.q_norm != nullptr) {
#pragma unroll
    for (int offset = kWarp / 2; offset > 0; offset /= 2) squares += __shfl_xor_sync(0xffffffffu, squares, offset);
    const float scale = rsqrtf(squares / static_cast<float>(hd) + a.norm_eps);
    const T* w = static_cast<const T*>(is_q ? a.q_norm : a.k_norm);
#pragma unroll
    for (int t = 0; t < kPerLane; ++t) {
      const int64_t j = lane + static_cast<int64_t>(t) * kWarp;
      if (j >= half) break;
      lo[t] = rounded<T>(rounded<T>(lo[t] * scale) * to_float(w[j]));
      hi[t] = rounded<T>(rounded<T>(hi[t] * scale) * to_float(w[j + half]));
    }
  }
  const T* cos = static_cast<const T*>(a.cos) + row * a.rope_row_stride;
  const T* sin = static_cast<const T*>(a.sin) + row * a.rope_row_stride;
#pragma unroll
  for (int t = 0; t < kPerLane; ++t) {
    const int64_t j = lane + static_cast<int64_t>(t) * kWarp;
    if (j >= half) break;
    // x * cos + [x2, x1] * [-sin, sin]: apply_rope's form (decoder_model.cpp).
    dst[j] = from_float<T>(rounded<T>(lo[t] * to_float(cos[j])) + hi[t] * to_float(sin[j]));
    dst[j + half] = from_float<T>(rounded<T>(hi[t] * to_float(cos[j + half])) + lo[t] * to_float(sin[j + half]));
  }
}

template <typename T>
__global__ void silu_times_up_kernel(SiluTimesUp a) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= a.rows * a.width) return;
  const int64_t row = i / a.width, column = i % a.width;
  const float g = to_float(static_cast<const T*>(a.gate)[row * a.gate_row_stride + column]);
  const float u = to_float(static_cast<const T*>(a.up)[row * a.up_row_stride + column]);
  // libtorch's silu: x / (1 + exp(-x)) in float32, rounded; then the product, rounded.
  static_cast<T*>(a.out)[i] = from_float<T>(rounded<T>(g / (1.f + expf(-g))) * u);
}

const char* launched() {
  const cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? nullptr : cudaGetErrorString(e);
}

}  // namespace

const char* launch_heads_into_cache(const HeadsIntoCache& args, void* stream) {
  if (args.head_dim % 2 != 0 || args.head_dim > kMaxHeadDim || args.head_dim <= 0) return "head_dim must be even and at most 512";
  const int64_t warps = args.rows * (args.q_heads + 2 * args.kv_heads);
  if (warps == 0) return nullptr;
  constexpr int kThreads = 128;  // four heads a block
  const int64_t blocks = (warps * kWarp + kThreads - 1) / kThreads;
  if (blocks > kMaxBlocks) return "too many rows for one launch";
  auto* s = static_cast<cudaStream_t>(stream);
  if (args.element == Element::kBFloat16) heads_into_cache_kernel<__nv_bfloat16><<<static_cast<unsigned>(blocks), kThreads, 0, s>>>(args);
  else heads_into_cache_kernel<__half><<<static_cast<unsigned>(blocks), kThreads, 0, s>>>(args);
  return launched();
}

const char* launch_silu_times_up(const SiluTimesUp& args, void* stream) {
  const int64_t n = args.rows * args.width;
  if (n == 0) return nullptr;
  constexpr int kThreads = 256;
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  if (blocks > kMaxBlocks) return "too many elements for one launch";
  auto* s = static_cast<cudaStream_t>(stream);
  if (args.element == Element::kBFloat16) silu_times_up_kernel<__nv_bfloat16><<<static_cast<unsigned>(blocks), kThreads, 0, s>>>(args);
  else silu_times_up_kernel<__half><<<static_cast<unsigned>(blocks), kThreads, 0, s>>>(args);
  return launched();
}

}  // namespace areal::torch_model::cuda_kernels
