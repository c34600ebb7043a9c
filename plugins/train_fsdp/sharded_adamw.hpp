// AdamW over this rank's slice of the flat parameters (torch.optim.AdamW's
// update, decoupled weight decay and bias correction included). Each rank
// holds the moments of its own slice only.
#pragma once

#include <string>
#include <cstdint>

#include <torch/autograd.h>
#include <torch/types.h>

namespace areal::fsdp {

struct AdamWOptions {
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.0;
};

class ShardedAdamW {
 public:
  ShardedAdamW(const torch::Tensor& shard, AdamWOptions o);
  // One update of `shard` in place; `step` counts from 1.
  void step(torch::Tensor& shard, const torch::Tensor& grad, double lr, int64_t step);
  int64_t state_bytes() const { return (m_.numel() + v_.numel()) * static_cast<int64_t>(m_.element_size()); }
  void save(const std::string& path) const;
  void load(const std::string& path);

 private:
  AdamWOptions o_;
  torch::Tensor m_, v_;
  torch::Tensor step_;  // the fused kernel's step counter (a float32 scalar on the device)
};

}  // namespace areal::fsdp
