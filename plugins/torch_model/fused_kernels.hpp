// CUDA-only kernels of newer libtorch releases that the model calls when they
// apply, each with the portable path as the caller's fallback: varlen flash
// attention over packed sequences, and the bf16 x bf16 -> float32 product of
// the log-prob head. Whether this libtorch and GPU run each one is probed
// once per process with a tiny call (outside any CUDA graph capture), so a
// build or card without them loses speed, not correctness, and says so once
// on stderr.
#pragma once

#include <cstdint>
#include <vector>

#include <torch/types.h>

namespace areal::torch_model::fused {

// Causal self-attention within each sequence of a packed batch in one flash
// call: q [T, heads, hd], k/v [T, kv_heads, hd] (grouped-query: heads a
// multiple of kv_heads, read in place), `cu_seqlens` int32 [B+1] offsets on
// q's device, `longest` the longest sequence. [T, heads, hd], or undefined
// where the kernel does not apply (not CUDA, not bf16/fp16, a head size flash
// lacks, libtorch < 2.5, a GPU flash does not support, no offsets).
torch::Tensor varlen_causal_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, const torch::Tensor& cu_seqlens,
                                      int64_t longest);

// Sequence offsets [B+1] as varlen_causal_attention takes them, empty
// sequences left out (they hold no token, and flash's path for one-token
// queries assumes a query row per sequence).
std::vector<int32_t> nonempty_offsets(const std::vector<int64_t>& bounds);

// Whether varlen_causal_attention applies to attention of this dtype and head size on `device`.
bool varlen_attention_applies(const torch::Device& device, torch::ScalarType dtype, int64_t head_dim);

// Attention of new tokens over a token-major KV cache [slots, capacity,
// kv_heads, hd] (contiguous; grouped-query heads read in place) in one flash
// call. Sequence b's queries are the packed rows [cu_queries[b],
// cu_queries[b+1]) of q [T, heads, hd]: the last of its counts[b] keys,
// which lie in rows [0, counts[b]) of its slot (cu_keys[b] = slot *
// capacity; any slot order), each query seeing the keys up to its own
// (causal, aligned at the end). A decode step is the one-query case
// (longest_query 1, slot b = row b). counts int32 [B], offsets int32 [B+1],
// all on the device. Keys past a sequence's count are never read, so neither
// their values nor the capacity cost anything. [T, heads, hd], or undefined
// where the kernel does not apply (cached_attention_applies).
torch::Tensor cached_attention(const torch::Tensor& q, const torch::Tensor& k_cache, const torch::Tensor& v_cache, const torch::Tensor& counts,
                               const torch::Tensor& cu_queries, const torch::Tensor& cu_keys, int64_t longest_query);

// What cached_attention computes, written out (float32 softmax, a loop over
// sequences; the offsets are read on the host): the probe's reference. With
// AREAL_EMULATE_CACHED_ATTENTION=1 in the environment (a test hook),
// cached_attention applies on every device and dtype and computes this, so
// CPU tests run its callers' flash paths, offsets and counts included.
torch::Tensor cached_attention_reference(const torch::Tensor& q, const torch::Tensor& k_cache, const torch::Tensor& v_cache, const torch::Tensor& counts,
                                         const torch::Tensor& cu_queries, const torch::Tensor& cu_keys);

// Whether cached_attention applies on `device` in this dtype and head size:
// as varlen_causal_attention, and the probe's results match an explicit
// computation (a decode step, and chunks continuing slots out of order:
// the per-sequence key counts and the end-aligned causal mask are what it
// relies on).
bool cached_attention_applies(const torch::Device& device, torch::ScalarType dtype, int64_t head_dim);

// rows [n, d] x weight[V, d]^T as float32 [n, V] from bf16/fp16 operands on
// the tensor cores at their own rate (the products of bf16 or fp16 values are
// exact in float32 and the sums float32: the numbers of a float32 product of
// the same values, at twice TF32's speed and reading half the bytes of a
// float32 weight copy). Undefined where it does not apply (CPU, other dtypes,
// libtorch < 2.9).
torch::Tensor float32_product(const torch::Tensor& rows, const torch::Tensor& weight);

// a [n, k] x b [k, m] as float32 [n, m], the same product for 2-D operands
// as they lie (transposed views are read in place); undefined where
// float32_product does not apply.
torch::Tensor float32_matmul(const torch::Tensor& a, const torch::Tensor& b);

// Whether float32_product applies to operands of this dtype on `device`.
bool float32_product_applies(const torch::Device& device, torch::ScalarType dtype);

}  // namespace areal::torch_model::fused
