#include "core/trainer/algorithm_loss.hpp"

#include <algorithm>

#include <exception>

#include "core/plugin_host/string_writer.hpp"

namespace areal::trainer {

using nlohmann::json;

areal_status* AlgorithmLoss::eval(void* ctx, const areal_tensor_map* batch, double* out_loss, DLTensor* out_grad,
                                  const areal_writer* out_stats) {
  auto* b = static_cast<AlgorithmLoss*>(ctx);
  StringCollector w;
  areal_status* st = b->vt_->loss(b->self_, batch, out_loss, out_grad, w.writer());
  if (st != nullptr) return st;
  if (out_stats != nullptr && !w.text.empty()) {
    if (areal_status* ws = out_stats->write(out_stats->ctx, areal_str{w.text.data(), w.text.size()})) return ws;
  }
  try {
    const json stats = json::parse(w.text.empty() ? "{}" : w.text);
    const double n = stats.value("loss_tokens", 1.0);
    for (const auto& [k, v] : stats.items()) {
      if (!v.is_number() || k == "loss_tokens") continue;
      if (is_maximum(k)) {
        auto [it, fresh] = b->maxima_.emplace(k, v.get<double>());
        if (!fresh) it->second = std::max(it->second, v.get<double>());
      } else {
        b->weighted_[k] += v.get<double>() * n;
      }
    }
    b->tokens_ += n;
  } catch (const std::exception&) {
    // Stats are diagnostics; a plugin writing bad JSON loses only them.
  }
  return nullptr;
}

json AlgorithmLoss::averages() const {
  json out = json::object();
  for (const auto& [k, v] : weighted_) out[k] = tokens_ > 0 ? v / tokens_ : 0.0;
  for (const auto& [k, v] : maxima_) out[k] = v;
  return out;
}

json AlgorithmLoss::sums() const { return {{"weighted", weighted_}, {"maxima", maxima_}, {"tokens", tokens_}}; }

}  // namespace areal::trainer
