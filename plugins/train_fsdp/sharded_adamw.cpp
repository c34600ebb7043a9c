#include "sharded_adamw.hpp"

#include <cmath>

#include "areal/sdk.hpp"

namespace areal::fsdp {

ShardedAdamW::ShardedAdamW(const torch::Tensor& shard, AdamWOptions o)
    : o_(o), m_(torch::zeros_like(shard)), v_(torch::zeros_like(shard)) {}

void ShardedAdamW::step(torch::Tensor& shard, const torch::Tensor& grad, double lr, int64_t step) {
  torch::NoGradGuard no_grad;
  shard.mul_(1 - lr * o_.weight_decay);
  m_.mul_(o_.beta1).add_(grad, 1 - o_.beta1);
  v_.mul_(o_.beta2).addcmul_(grad, grad, 1 - o_.beta2);
  const double bc1 = 1 - std::pow(o_.beta1, static_cast<double>(step));
  const double bc2 = 1 - std::pow(o_.beta2, static_cast<double>(step));
  const torch::Tensor denom = (v_.sqrt() / std::sqrt(bc2)).add_(o_.eps);
  shard.addcdiv_(m_, denom, -lr / bc1);
}

void ShardedAdamW::save(const std::string& path) const {
  torch::save(std::vector<torch::Tensor>{m_.cpu(), v_.cpu()}, path);  // host tensors: loadable on any device
}

void ShardedAdamW::load(const std::string& path) {
  std::vector<torch::Tensor> mv;
  torch::load(mv, path);
  if (mv.size() != 2 || !mv[0].sizes().equals(m_.sizes()) || !mv[1].sizes().equals(v_.sizes()))
    throw sdk::invalid_argument("load: " + path + " holds optimizer state of another shape (another model or world size?)");
  m_.copy_(mv[0]);  // to wherever the moments live
  v_.copy_(mv[1]);
}

}  // namespace areal::fsdp
