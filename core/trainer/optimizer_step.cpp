#include "core/trainer/optimizer_step.hpp"

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/plugin_host/error.hpp"
#include "core/plugin_host/string_writer.hpp"

namespace areal::trainer {

using nlohmann::json;

namespace {

void call(areal_status* st, const char* what) { throw_if_status(st, what); }

// areal_loss_fn over the algorithm plugin's loss slot. It also keeps the
// algorithm's per-micro-batch stats, averaged by loss tokens, which the
// train plugin would otherwise not see.
struct LossBridge {
  const areal_algorithm_vtable* vt;
  void* self;
  std::map<std::string, double> weighted;
  double tokens = 0;

  static areal_status* eval(void* ctx, const areal_tensor_map* batch, double* out_loss, DLTensor* out_grad,
                            const areal_writer* out_stats) {
    auto* b = static_cast<LossBridge*>(ctx);
    StringCollector w;
    areal_status* st = b->vt->loss(b->self, batch, out_loss, out_grad, w.writer());
    if (st != nullptr) return st;
    if (out_stats != nullptr && !w.text.empty()) {
      if (areal_status* ws = out_stats->write(out_stats->ctx, areal_str{w.text.data(), w.text.size()})) return ws;
    }
    try {
      const json stats = json::parse(w.text.empty() ? "{}" : w.text);
      const double n = stats.value("loss_tokens", 1.0);
      for (const auto& [k, v] : stats.items())
        if (v.is_number() && k != "loss_tokens") b->weighted[k] += v.get<double>() * n;
      b->tokens += n;
    } catch (const std::exception&) {
      // Stats are diagnostics; a plugin writing bad JSON loses only them.
    }
    return nullptr;
  }
  json averages() const {
    json out = json::object();
    for (const auto& [k, v] : weighted) out[k] = tokens > 0 ? v / tokens : 0.0;
    return out;
  }
};

// A train plugin's log-probs of the batch's tokens, copied out of the
// plugin-owned DLPack tensor (released before returning).
std::vector<float> logprobs_of(const areal_train_vtable& vt, void* self, PackedBatch& batch, float temperature, const char* what) {
  TensorMapBuilder m = batch.map();
  DLManagedTensor* lp = nullptr;
  call(vt.compute_logprobs(self, m.get(), temperature, &lp), what);
  std::unique_ptr<DLManagedTensor, void (*)(DLManagedTensor*)> owned(lp, [](DLManagedTensor* t) {
    if (t && t->deleter) t->deleter(t);
  });
  const DLTensor& t = lp->dl_tensor;
  if (t.ndim != 1 || t.shape[0] != static_cast<int64_t>(batch.tokens()) || t.dtype.code != kDLFloat || t.dtype.bits != 32)
    throw Error(AREAL_CODE_INTERNAL, std::string(what) + " returned a tensor that is not float32 [T]");
  const float* p = reinterpret_cast<const float*>(static_cast<const char*>(t.data) + t.byte_offset);
  return std::vector<float>(p, p + batch.tokens());
}

}  // namespace

json optimizer_step(const StepPlugins& parts, PackedBatch& batch, float temperature, bool recompute_logprob) {
  const areal_train_vtable& train = *parts.train;
  const areal_algorithm_vtable& algo = *parts.algorithm;
  if (recompute_logprob)
    batch.prox_logprobs.values() = logprobs_of(train, parts.train_self, batch, temperature, "train compute_logprobs");
  if (parts.ref != nullptr)
    batch.ref_logprobs.values() = logprobs_of(*parts.ref, parts.ref_self, batch, temperature, "ref compute_logprobs");
  {
    TensorMapBuilder in = batch.map(), out;
    HostTensor<float> adv(std::vector<float>(batch.tokens(), 0.0f));
    out.add("advantages", adv.dl());
    call(algo.compute_advantages(parts.algorithm_self, in.get(), out.get()), "algorithm compute_advantages");
    batch.advantages = adv;
  }
  LossBridge bridge{&algo, parts.algorithm_self, {}, 0};
  areal_loss_fn loss{AREAL_OFFSET_OF_END(areal_loss_fn, eval), &bridge, &LossBridge::eval};
  StringCollector stats_text;
  {
    TensorMapBuilder m = batch.map();
    call(train.train_step(parts.train_self, m.get(), &loss, stats_text.writer()), "train train_step");
  }
  json stats = json::parse(stats_text.text.empty() ? "{}" : stats_text.text);
  const json algo_stats = bridge.averages();  // named: items() must not outlive a temporary
  for (const auto& [k, v] : algo_stats.items()) stats["algo_" + k] = v;
  return stats;
}

}  // namespace areal::trainer
