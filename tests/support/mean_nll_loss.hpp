// The simplest loss a train plugin can be driven with: minus the mean
// log-prob over the micro-batch's loss tokens (the engine weights
// micro-batches by their share of the batch). Shared by the torch tests,
// the data-parallel driver and bench/model.
#pragma once

#include <algorithm>
#include <string>
#include <cstdint>

#include "areal/plugin_api.h"

namespace areal::testing {

inline areal_status* mean_nll_eval(void*, const areal_tensor_map* m, double* loss, DLTensor* grad, const areal_writer*) {
  const DLTensor *lp = nullptr, *lm = nullptr;
  for (size_t i = 0; i < m->count; ++i) {
    const std::string n(m->names[i].data, m->names[i].size);
    if (n == "new_logprobs") lp = m->tensors[i];
    if (n == "loss_mask") lm = m->tensors[i];
  }
  const auto* l = static_cast<const float*>(lp->data);
  const auto* k = static_cast<const int32_t*>(lm->data);
  auto* g = static_cast<float*>(grad->data);
  double n = 0, s = 0;
  for (int64_t i = 0; i < lp->shape[0]; ++i) n += k[i] != 0;
  for (int64_t i = 0; i < lp->shape[0]; ++i) {
    g[i] = k[i] ? static_cast<float>(-1.0 / std::max(1.0, n)) : 0.0f;
    s += k[i] ? l[i] : 0.0;
  }
  *loss = -s / std::max(1.0, n);
  return nullptr;
}

inline areal_loss_fn mean_nll_loss() { return areal_loss_fn{AREAL_OFFSET_OF_END(areal_loss_fn, eval), nullptr, mean_nll_eval}; }

}  // namespace areal::testing
