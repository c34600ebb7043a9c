// The local engine's KV cache: every layer's keys and values for each slot
// (a request's rows), preallocated and grown as requests get longer.
//
// Layout, per layer: [slots, capacity, kv_heads, head_dim], token-major, as
// a flash kernel reads a cache. A slot's rows are one contiguous block, so
// the whole cache viewed as [slots * capacity, kv_heads, head_dim] is a
// packed batch whose sequence i starts at row i * capacity: a decode step
// attends over each row's first keys in one varlen call, reading no key past
// them (DecoderModel::attend_cached_heads). Scheduler thread only.
#pragma once

#include <cstdint>
#include <vector>

#include <torch/types.h>

namespace areal::local_inference {

class KvCache {
 public:
  KvCache(int64_t slots, int64_t layers, int64_t kv_heads, int64_t head_dim, int64_t max_context, torch::Dtype dtype, torch::Device device);

  // Room for `tokens` keys in every slot: the cache grows (to a multiple of
  // 64, at least doubling, at most max_context) and keeps what it holds.
  // True when the tensors were reallocated (graphs that captured their
  // addresses are stale).
  bool reserve(int64_t tokens);
  void clear();  // gives the memory back; capacity 0
  int64_t capacity() const { return capacity_; }

  // Layer l's keys and values, [slots, capacity, kv_heads, head_dim].
  const torch::Tensor& keys(int64_t layer) const { return k_[static_cast<size_t>(layer)]; }
  const torch::Tensor& values(int64_t layer) const { return v_[static_cast<size_t>(layer)]; }

  // Rows [0, tokens) of slot `from` copied into slot `to`, in every layer.
  void copy_prefix(int64_t from, int64_t to, int64_t tokens);

 private:
  int64_t slots_, layers_, kv_heads_, head_dim_, max_context_;
  torch::TensorOptions options_;
  int64_t capacity_ = 0;
  std::vector<torch::Tensor> k_, v_;
};

}  // namespace areal::local_inference
