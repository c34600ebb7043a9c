// Global-norm gradient clipping, as torch.nn.utils.clip_grad_norm_ does it:
// every gradient is multiplied by min(1, max_norm / (norm + 1e-6)), where
// norm is the L2 norm over all of them (every rank's slice). Checked against
// torch's own function (tests/torch/optimizer_reference_test.cpp).
#pragma once

#include <algorithm>

namespace areal::fsdp {

// The multiplier for gradients whose global L2 norm is `global_norm`;
// max_norm <= 0 disables clipping (1).
inline double clip_coefficient(double global_norm, double max_norm) {
  return max_norm > 0 ? std::min(1.0, max_norm / (global_norm + 1e-6)) : 1.0;
}

}  // namespace areal::fsdp
