#include "core/trainer/optimizer_step.hpp"

#include <algorithm>
#include <cmath>
#include <memory>
#include <set>
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

json join_minibatch_stats(const std::vector<json>& parts) {
  if (parts.size() == 1) return parts.front();
  static const std::set<std::string> added = {"tokens", "loss_tokens", "computed_tokens", "micro_batches", "update_skipped"};
  static const std::set<std::string> last = {"step", "skipped_updates", "lr", "world_size", "resident_state_bytes"};
  auto weight_of = [](const json& p) { return p.contains("loss_tokens") && p["loss_tokens"].is_number() ? p["loss_tokens"].get<double>() : 0.0; };
  json out = json::object();
  for (const json& first : parts) {
    for (const auto& item : first.items()) {
      const std::string& k = item.key();
      if (out.contains(k)) continue;
      // The parts that have k, in order; a non-number (text, or a null
      // grad_norm of a skipped update) is kept as it is: the last one wins.
      std::vector<std::pair<double, double>> numbers;  // (value, weight)
      json other;
      bool not_a_number = false;
      for (const json& p : parts) {
        if (!p.contains(k)) continue;
        if (p[k].is_number()) numbers.emplace_back(p[k].get<double>(), weight_of(p));
        else other = p[k], not_a_number = true;
      }
      if (not_a_number) {
        out[k] = other;
        continue;
      }
      if (last.count(k)) {
        out[k] = numbers.back().first;
      } else if (added.count(k)) {
        double sum = 0;
        for (const auto& [v, w] : numbers) sum += v;
        out[k] = sum;
      } else if (AlgorithmLoss::is_maximum(k) || k.rfind("peak_", 0) == 0) {
        double m = numbers.front().first;
        for (const auto& [v, w] : numbers) m = std::max(m, v);
        out[k] = m;
      } else {  // weighted by loss_tokens; a plain mean without that stat
        double weighted = 0, weights = 0, plain = 0;
        for (const auto& [v, w] : numbers) weighted += v * w, weights += w, plain += v;
        out[k] = weights > 0 ? weighted / weights : plain / static_cast<double>(numbers.size());
      }
    }
  }
  return out;
}

json optimizer_step(const StepPlugins& parts, PackedBatch& batch, const StepOptions& options) {
  const areal_train_vtable& train = *parts.train;
  const areal_algorithm_vtable& algo = *parts.algorithm;
  batch.total_updates.value() = options.total_updates;
  json drift;
  if (options.recompute_logprob) {
    batch.prox_logprobs.values() = logprobs_of(train, parts.train_self, batch, options.temperature, "train compute_logprobs");
    drift = logprob_drift(batch);
  }
  if (parts.ref != nullptr)
    batch.ref_logprobs.values() = logprobs_of(*parts.ref, parts.ref_self, batch, options.temperature, "ref compute_logprobs");
  {
    TensorMapBuilder in = batch.map(), out;
    HostTensor<float> adv(std::vector<float>(batch.tokens(), 0.0f));
    out.add("advantages", adv.dl());
    call(algo.compute_advantages(parts.algorithm_self, in.get(), out.get()), "algorithm compute_advantages");
    batch.advantages = adv;
  }
  AlgorithmLoss loss(&algo, parts.algorithm_self);
  std::vector<json> train_stats;
  auto train_step = [&](PackedBatch& b) {
    StringCollector stats_text;
    TensorMapBuilder m = b.map();
    call(train.train_step(parts.train_self, m.get(), loss.fn(), stats_text.writer()), "train train_step");
    train_stats.push_back(json::parse(stats_text.text.empty() ? "{}" : stats_text.text));
  };
  const int64_t min_rows = std::max<int64_t>(1, options.rows_per_minibatch);
  const int64_t n = std::clamp<int64_t>(options.minibatches, 1, std::max<int64_t>(1, static_cast<int64_t>(batch.rows()) / min_rows));
  if (n == 1) {
    train_step(batch);
  } else {
    TensorMapBuilder whole = batch.map();
    const std::vector<int64_t> cu(batch.cu_seqlens.values().begin(), batch.cu_seqlens.values().end());
    for (const BatchSlice& s : plan_slices(cu, static_cast<int>(n), shared_prefixes(*whole.get()), "PPO minibatches", min_rows)) {
      PackedBatch part(batch.policy_version.value(), batch.temperature.value());
      part.assign_rows(batch, s);
      train_step(part);
    }
  }
  json stats = join_minibatch_stats(train_stats);
  if (n > 1) stats["minibatches"] = n;
  const json algo_stats = loss.averages();  // named: items() must not outlive a temporary
  for (const auto& [k, v] : algo_stats.items()) stats["algo_" + k] = v;
  if (!drift.is_null()) stats.update(drift);
  return stats;
}

}  // namespace areal::trainer
