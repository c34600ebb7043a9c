// The algorithm plugin's loss slot as the areal_loss_fn a train plugin
// calls per micro-batch. It also keeps the algorithm's per-micro-batch
// stats as loss-token weighted sums, which the train plugin would otherwise
// not see (a train rank process sends the sums; the controller joins them).
// A stat named *_max is a maximum: kept as the largest value, not averaged.
#pragma once

#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "areal/plugin_api.h"

namespace areal::trainer {

class AlgorithmLoss {
 public:
  AlgorithmLoss(const areal_algorithm_vtable* vt, void* self) : vt_(vt), self_(self) {}
  AlgorithmLoss(const AlgorithmLoss&) = delete;
  AlgorithmLoss& operator=(const AlgorithmLoss&) = delete;

  // Valid while this lives.
  const areal_loss_fn* fn() const { return &fn_; }
  // {key: average over the loss tokens seen}.
  nlohmann::json averages() const;
  // {"weighted": {key: sum of value * loss_tokens}, "maxima": {key: max}, "tokens": n}.
  nlohmann::json sums() const;
  static bool is_maximum(const std::string& key) { return key.size() > 4 && key.compare(key.size() - 4, 4, "_max") == 0; }

 private:
  static areal_status* eval(void* ctx, const areal_tensor_map* batch, double* out_loss, DLTensor* out_grad, const areal_writer* out_stats);

  const areal_algorithm_vtable* vt_;
  void* self_;
  std::map<std::string, double> weighted_, maxima_;
  double tokens_ = 0;
  areal_loss_fn fn_{AREAL_OFFSET_OF_END(areal_loss_fn, eval), this, &AlgorithmLoss::eval};
};

}  // namespace areal::trainer
