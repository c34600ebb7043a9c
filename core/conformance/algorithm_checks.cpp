// Behavioural checks for algorithm plugins on a small packed batch: finite
// advantages, nothing outside the loss mask, and a gradient that agrees
// with finite differences of the loss (so loss and grad cannot drift apart).
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>
#include <memory>
#include <algorithm>

#include "core/plugin_host/host_tensor.hpp"
#include "core/plugin_host/plugin_instance.hpp"
#include "checker.hpp"

namespace areal::conformance {
namespace {

// Two groups of two sequences; the first token of each sequence is prompt.
struct Batch {
  HostTensor<int32_t> cu_seqlens{{0, 3, 7, 10, 12}};
  HostTensor<int32_t> input_ids{{1, 2, 3, 1, 4, 5, 6, 2, 7, 8, 3, 9}};
  HostTensor<int32_t> loss_mask{{0, 1, 1, 0, 1, 1, 1, 0, 1, 1, 0, 1}};
  HostTensor<float> logprobs{{0, -1.2f, -0.7f, 0, -2.0f, -0.3f, -0.9f, 0, -1.5f, -0.4f, 0, -0.8f}};
  HostTensor<int64_t> versions{{0, 3, 3, 0, 3, 3, 3, 0, 2, 2, 0, 3}};
  HostTensor<float> rewards{{1.0f, 0.0f, 0.5f, 0.25f}};
  HostTensor<int64_t> group_ids{{0, 0, 1, 1}};
  HostTensor<float> advantages{std::vector<float>(12, 0.0f)};
  HostTensor<float> new_logprobs;
  HostTensor<float> prox_logprobs;  // what a trainer recomputes before the step
  HostScalar<int64_t> policy_version{4};

  Batch() {
    // Slightly off-policy, so ratio-based objectives see non-trivial ratios.
    new_logprobs = logprobs;
    for (size_t i = 0; i < 12; ++i) new_logprobs.values()[i] += 0.05f * static_cast<float>(i % 3) - 0.05f;
    prox_logprobs = logprobs;
    for (size_t i = 0; i < 12; ++i) prox_logprobs.values()[i] += 0.02f * static_cast<float>(i % 2);
  }
  TensorMapBuilder base() {
    TensorMapBuilder b;
    b.add("cu_seqlens", cu_seqlens.dl()).add("input_ids", input_ids.dl()).add("loss_mask", loss_mask.dl());
    b.add("logprobs", logprobs.dl()).add("versions", versions.dl()).add("rewards", rewards.dl()).add("group_ids", group_ids.dl());
    b.add("prox_logprobs", prox_logprobs.dl()).add("policy_version", policy_version.dl());
    return b;
  }
};

}  // namespace

void check_algorithm(const std::shared_ptr<LoadedPlugin>& p, const ConformanceOptions& o, Checker& c) {
  const areal_algorithm_vtable& vt = *p->algorithm();
  std::string name = "conformance";
  areal_services services = make_services(name);
  std::unique_ptr<PluginInstance> inst;
  c.run("algorithm: create with the given config", [&] {
    inst = std::make_unique<PluginInstance>(p, effective_config(*p, o.config_json), &services);
  });
  if (!inst) return;
  void* self = inst->self();
  Batch batch;

  c.run("algorithm: advantages are finite and zero outside the loss mask", [&] {
    TensorMapBuilder in = batch.base(), out;
    std::fill(batch.advantages.values().begin(), batch.advantages.values().end(), 123.0f);
    out.add("advantages", batch.advantages.dl());
    throw_if_status(vt.compute_advantages(self, in.get(), out.get()), "compute_advantages");
    const auto& adv = batch.advantages.values();
    for (size_t i = 0; i < adv.size(); ++i) {
      expect(std::isfinite(adv[i]), "advantage " + std::to_string(i) + " is not finite");
      if (batch.loss_mask.values()[i] == 0) expect(adv[i] == 0.0f, "advantage at masked-out position " + std::to_string(i) + " is " + std::to_string(adv[i]));
    }
  });
  c.run("algorithm: a batch without loss_mask is INVALID_ARGUMENT", [&] {
    TensorMapBuilder in, out;
    in.add("rewards", batch.rewards.dl());
    out.add("advantages", batch.advantages.dl());
    int32_t code = code_of(vt.compute_advantages(self, in.get(), out.get()));
    expect(code == AREAL_CODE_INVALID_ARGUMENT, std::string("returned ") + code_name(code));
  });

  auto eval = [&](HostTensor<float>& new_lp, HostTensor<float>& grad, double* loss, std::string* stats) {
    TensorMapBuilder in = batch.base();
    in.add("advantages", batch.advantages.dl()).add("new_logprobs", new_lp.dl());
    StringCollector w;
    throw_if_status(vt.loss(self, in.get(), loss, grad.dl(), w.writer()), "loss");
    if (stats) *stats = w.text;
  };
  c.run("algorithm: loss and gradient are finite; gradient is zero outside the mask", [&] {
    HostTensor<float> grad(std::vector<float>(12, 0.0f));
    double loss = 0;
    std::string stats;
    eval(batch.new_logprobs, grad, &loss, &stats);
    expect(std::isfinite(loss), "loss is not finite");
    for (size_t i = 0; i < 12; ++i) {
      expect(std::isfinite(grad.values()[i]), "grad " + std::to_string(i) + " is not finite");
      if (batch.loss_mask.values()[i] == 0) expect(grad.values()[i] == 0.0f, "grad at masked-out position " + std::to_string(i));
    }
    if (!stats.empty()) expect(nlohmann::json::parse(stats).is_object(), "stats are not a JSON object: " + stats);
  });
  c.run("algorithm: gradient matches central finite differences of the loss", [&] {
    HostTensor<float> grad(std::vector<float>(12, 0.0f)), scratch(std::vector<float>(12, 0.0f));
    double loss = 0;
    eval(batch.new_logprobs, grad, &loss, nullptr);
    const float h = 1e-3f;
    for (size_t i = 0; i < 12; ++i) {
      if (batch.loss_mask.values()[i] == 0) continue;
      HostTensor<float> plus = batch.new_logprobs, minus = batch.new_logprobs;
      plus.values()[i] += h;
      minus.values()[i] -= h;
      double lp = 0, lm = 0;
      eval(plus, scratch, &lp, nullptr);
      eval(minus, scratch, &lm, nullptr);
      const double numeric = (lp - lm) / (2.0 * h);
      const double analytic = grad.values()[i];
      expect(std::fabs(numeric - analytic) <= 1e-2 * std::max(1.0, std::fabs(numeric)),
             "position " + std::to_string(i) + ": analytic " + std::to_string(analytic) + " vs numeric " + std::to_string(numeric));
    }
  });
}

}  // namespace areal::conformance
