#include "kv_cache.hpp"

#include <algorithm>

#include <torch/types.h>

namespace areal::local_inference {

KvCache::KvCache(int64_t slots, int64_t layers, int64_t kv_heads, int64_t head_dim, int64_t max_context, torch::Dtype dtype, torch::Device device)
    : slots_(slots),
      layers_(layers),
      kv_heads_(kv_heads),
      head_dim_(head_dim),
      max_context_(max_context),
      options_(torch::TensorOptions().dtype(dtype).device(device)) {}

bool KvCache::reserve(int64_t tokens) {
  if (tokens <= capacity_) return false;
  const int64_t grown = std::min(max_context_, (std::max(tokens, 2 * capacity_) + 63) / 64 * 64);
  const int64_t cap = std::max(tokens, grown);
  for (auto* cache : {&k_, &v_}) {
    cache->resize(static_cast<size_t>(layers_));
    for (auto& t : *cache) {
      // Zeros, not garbage: a masked key gets weight 0, and 0 * NaN would not be 0.
      torch::Tensor bigger = torch::zeros({slots_, cap, kv_heads_, head_dim_}, options_);
      if (t.defined()) bigger.narrow(1, 0, capacity_).copy_(t);
      t = bigger;
    }
  }
  capacity_ = cap;
  return true;
}

void KvCache::clear() {
  k_.clear();
  v_.clear();
  capacity_ = 0;
}

void KvCache::copy_prefix(int64_t from, int64_t to, int64_t tokens) {
  for (auto* cache : {&k_, &v_})
    for (auto& t : *cache) t.select(0, to).narrow(0, 0, tokens).copy_(t.select(0, from).narrow(0, 0, tokens));
}

}  // namespace areal::local_inference
