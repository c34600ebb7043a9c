#include "sharded_adamw.hpp"

#include <torch/serialize.h>
#include <torch/version.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "areal/sdk.hpp"

// at::_fused_adamw_ (CUDA) arrived with PyTorch 2.0; Debian's 1.13 keeps the unfused update.
#if defined(TORCH_VERSION_MAJOR) && TORCH_VERSION_MAJOR >= 2
#define AREAL_HAS_FUSED_ADAMW 1
#else
#define AREAL_HAS_FUSED_ADAMW 0
#endif

namespace areal::fsdp {

ShardedAdamW::ShardedAdamW(const torch::Tensor& shard, AdamWOptions o)
    : o_(o), m_(torch::zeros_like(shard)), v_(torch::zeros_like(shard)) {}

void ShardedAdamW::step(torch::Tensor& shard, const torch::Tensor& grad, double lr, int64_t step) {
  torch::NoGradGuard no_grad;
#if AREAL_HAS_FUSED_ADAMW
  if (shard.is_cuda() && grad.scalar_type() == shard.scalar_type()) {
    // libtorch's fused kernel: the same update (decoupled decay, then the
    // moments, then the bias-corrected step at `step`) in one pass over the
    // slice instead of six. It reads the step from a float32 device scalar.
    if (!step_.defined()) step_ = torch::zeros({}, shard.options().dtype(torch::kFloat32));
    step_.fill_(static_cast<double>(step));
    at::_fused_adamw_({shard}, {grad}, {m_}, {v_}, {}, {step_}, lr, o_.beta1, o_.beta2, o_.weight_decay, o_.eps, /*amsgrad=*/false,
                      /*maximize=*/false);
    return;
  }
#endif
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
