#include "core/trainer/optimizer_step.hpp"

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>
#include <cstdint>

#include "core/plugin_host/error.hpp"
#include "core/trainer/algorithm_loss.hpp"
#include "core/plugin_host/string_writer.hpp"

namespace areal::trainer {

using nlohmann::json;

namespace {

void call(areal_status* st, const char* what) { throw_if_status(st, what); }

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

// Token drift between rollout and training: on the tokens the engine sampled
// with the very weights the trainer just recomputed with (their version is
// the batch's policy version), both sides' log-probs must agree. The largest
// difference and how many such tokens there were (0 when every sample is
// stale); docs/algorithms.md says what to expect.
json logprob_drift(PackedBatch& batch) {
  const auto& mask = batch.loss_mask.values();
  const auto& versions = batch.versions.values();
  const auto& behave = batch.logprobs.values();
  const auto& prox = batch.prox_logprobs.values();
  const int64_t current = batch.policy_version.value();
  double worst = 0;
  size_t fresh = 0;
  for (size_t i = 0; i < prox.size() && i < behave.size(); ++i) {
    if (!mask[i] || versions[i] != current) continue;
    worst = std::max(worst, static_cast<double>(std::abs(behave[i] - prox[i])));
    ++fresh;
  }
  return {{"logprob_drift_max", worst}, {"logprob_drift_tokens", fresh}};
}

}  // namespace

json optimizer_step(const StepPlugins& parts, PackedBatch& batch, float temperature, bool recompute_logprob) {
  const areal_train_vtable& train = *parts.train;
  const areal_algorithm_vtable& algo = *parts.algorithm;
  json drift;
  if (recompute_logprob) {
    batch.prox_logprobs.values() = logprobs_of(train, parts.train_self, batch, temperature, "train compute_logprobs");
    drift = logprob_drift(batch);
  }
  if (parts.ref != nullptr)
    batch.ref_logprobs.values() = logprobs_of(*parts.ref, parts.ref_self, batch, temperature, "ref compute_logprobs");
  {
    TensorMapBuilder in = batch.map(), out;
    HostTensor<float> adv(std::vector<float>(batch.tokens(), 0.0f));
    out.add("advantages", adv.dl());
    call(algo.compute_advantages(parts.algorithm_self, in.get(), out.get()), "algorithm compute_advantages");
    batch.advantages = adv;
  }
  AlgorithmLoss loss(&algo, parts.algorithm_self);
  StringCollector stats_text;
  {
    TensorMapBuilder m = batch.map();
    call(train.train_step(parts.train_self, m.get(), loss.fn(), stats_text.writer()), "train train_step");
  }
  json stats = json::parse(stats_text.text.empty() ? "{}" : stats_text.text);
  const json algo_stats = loss.averages();  // named: items() must not outlive a temporary
  for (const auto& [k, v] : algo_stats.items()) stats["algo_" + k] = v;
  if (!drift.is_null()) stats.update(drift);
  return stats;
}

}  // namespace areal::trainer
