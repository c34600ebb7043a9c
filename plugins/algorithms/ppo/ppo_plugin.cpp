// The PPO family as algorithm plugins: one source, four libareal-NAME.so
// that differ only in their defaults (AREAL_PPO_VARIANT picks them):
//   grpo     group mean/std reward normalisation (Shao et al.)
//   dr_grpo  group mean only, no std scaling (Liu et al., "GRPO done right")
//   rloo     leave-one-out group mean baseline (Ahmadian et al.)
//   ppo      decoupled PPO (AReaL): no reward normalisation, decoupled loss on
// Every key can be set in YAML whichever variant is loaded; names and
// meanings follow AReaL's actor config (docs/algorithms.md).
#include <cstdint>
#include <string>
#include <vector>
#include <algorithm>

#include <nlohmann/json.hpp>

#include "areal/sdk.hpp"
#include "areal/sdk_json.hpp"
#include "ppo_math.hpp"
#include "tensor_view.hpp"

#if !defined(AREAL_PPO_VARIANT_GRPO) && !defined(AREAL_PPO_VARIANT_DR_GRPO) && !defined(AREAL_PPO_VARIANT_RLOO) && \
    !defined(AREAL_PPO_VARIANT_PPO)
#error "define one AREAL_PPO_VARIANT_* (see CMakeLists.txt)"
#endif

namespace {

using nlohmann::json;
namespace sdk = areal::sdk;
namespace ppo = areal::ppo;
using areal::algo::find;
using areal::algo::vector_of;

// The keys of a normalisation section (reward_norm, adv_norm).
#define AREAL_NORM_KEYS \
  R"("keys": { "mean_level": {"type": "string", "enum": ["batch", "group", "none"], "default": "batch", "doc": "Subtract the mean over the whole batch, per group, or not at all."},)" \
  R"("std_level": {"type": "string", "enum": ["batch", "group", "none"], "default": "batch", "doc": "Divide by the standard deviation over the batch, per group, or not at all."},)" \
  R"("mean_leave1out": {"type": "boolean", "default": false, "doc": "Each element's mean excludes itself (RLOO baseline)."},)" \
  R"("std_unbiased": {"type": "boolean", "default": true, "doc": "Bessel-corrected standard deviation."},)" \
  R"("eps": {"type": "number", "default": 1e-5, "minimum": 0, "doc": "Added to the standard deviation."}})"

#if defined(AREAL_PPO_VARIANT_GRPO)
#define AREAL_PPO_NAME "grpo"
#define AREAL_PPO_DESCRIPTION "GRPO: group-normalised rewards (mean and std per group), clipped policy loss."
#define AREAL_REWARD_NORM_DEFAULT R"({"mean_level": "group", "std_level": "group"})"
#define AREAL_DECOUPLED_DEFAULT "false"
#elif defined(AREAL_PPO_VARIANT_DR_GRPO)
#define AREAL_PPO_NAME "dr_grpo"
#define AREAL_PPO_DESCRIPTION "Dr.GRPO: group-mean baseline without std scaling, token-level loss."
#define AREAL_REWARD_NORM_DEFAULT R"({"mean_level": "group", "std_level": "none"})"
#define AREAL_DECOUPLED_DEFAULT "false"
#elif defined(AREAL_PPO_VARIANT_RLOO)
#define AREAL_PPO_NAME "rloo"
#define AREAL_PPO_DESCRIPTION "RLOO: leave-one-out group-mean baseline, clipped policy loss."
#define AREAL_REWARD_NORM_DEFAULT R"({"mean_level": "group", "mean_leave1out": true, "std_level": "none"})"
#define AREAL_DECOUPLED_DEFAULT "false"
#else
#define AREAL_PPO_NAME "ppo"
#define AREAL_PPO_DESCRIPTION "Decoupled PPO (AReaL): behaviour-weighted clipped loss against a proximal policy."
#define AREAL_REWARD_NORM_DEFAULT "null"
#define AREAL_DECOUPLED_DEFAULT "true"
#endif

ppo::Level level_of(const std::string& s) {
  return s == "group" ? ppo::Level::kGroup : s == "none" ? ppo::Level::kNone : ppo::Level::kBatch;
}

ppo::NormConfig norm_of(const json& j) {
  ppo::NormConfig n;
  if (j.is_null()) return n;
  n.enabled = true;
  n.mean_level = level_of(j.value("mean_level", std::string("batch")));
  n.std_level = level_of(j.value("std_level", std::string("batch")));
  n.mean_leave1out = j.value("mean_leave1out", false);
  n.std_unbiased = j.value("std_unbiased", true);
  n.eps = j.value("eps", 1e-5);
  return n;
}

double number_or(const json& c, const char* key, double fallback) {
  return c.contains(key) && c[key].is_number() ? c[key].get<double>() : fallback;
}

class PpoFamily {
 public:
  static constexpr const char* kName = AREAL_PPO_NAME;
  static constexpr const char* kVersion = "1.0.0";
  static constexpr const char* kDescription = AREAL_PPO_DESCRIPTION;
  static constexpr const char* kConfigSchema = R"({"type": "object", "keys": {
    "eps_clip": {"type": "number", "default": 0.2, "minimum": 0, "doc": "Clip the ratio below at 1 - eps_clip (and above at 1 + eps_clip unless eps_clip_higher is set)."},
    "eps_clip_higher": {"type": "number", "default": null, "minimum": 0, "doc": "Upper clip 1 + eps_clip_higher (DAPO's clip-higher); null uses eps_clip."},
    "c_clip": {"type": "number", "default": null, "minimum": 1, "doc": "Dual clip: for negative advantages the loss is at most -c_clip * A; null disables."},
    "reward_bias": {"type": "number", "default": 0.0, "doc": "Added to each reward before scaling."},
    "reward_scaling": {"type": "number", "default": 1.0, "doc": "Multiplies each biased reward."},
    "reward_clip": {"type": "number", "default": 20.0, "minimum": 0, "doc": "Shaped rewards are clipped to [-reward_clip, reward_clip]."},
    "reward_norm": {"type": "object", "default": )" AREAL_REWARD_NORM_DEFAULT R"(, "doc": "Normalisation of sequence rewards (groups from the batch's group_ids, never a fixed stride); null disables.", )" AREAL_NORM_KEYS R"(},
    "adv_norm": {"type": "object", "default": null, "doc": "Normalisation of token advantages over loss tokens; null disables.", )" AREAL_NORM_KEYS R"(},
    "kl_ctl": {"type": "number", "default": 0.0, "minimum": 0, "doc": "Weight of the KL-to-reference penalty folded into token rewards; > 0 needs ref_logprobs (a reference model)."},
    "kl_estimator": {"type": "string", "enum": ["k1", "k2", "k3"], "default": "k1", "doc": "KL estimator for kl_ctl."},
    "discount": {"type": "number", "default": 1.0, "minimum": 0, "maximum": 1, "doc": "Per-token discount of the returns."},
    "gae_lambda": {"type": "number", "default": 1.0, "minimum": 0, "maximum": 1, "doc": "GAE lambda (no critic: values are 0)."},
    "use_decoupled_loss": {"type": "boolean", "default": )" AREAL_DECOUPLED_DEFAULT R"(, "doc": "Decoupled PPO: clip against the proximal policy and weight by pi_prox / pi_behave."},
    "prox_logp_method": {"type": "string", "enum": ["recompute", "loglinear"], "default": "recompute", "doc": "Decoupled loss: proximal log-probs recomputed by the trainer (trainer.recompute_logprob) or interpolated from versions."},
    "importance_sampling_level": {"type": "string", "enum": ["token", "sequence"], "default": "token", "doc": "Ratio per token, or one geometric-mean ratio per sequence (GSPO)."},
    "rejection_sampling": {"type": "object", "default": null, "doc": "Decoupled loss only: bound pi_prox / pi_behave; null disables.", "keys": {
      "level": {"type": "string", "enum": ["token", "sequence"], "default": "token", "doc": "Judge each token, or each sequence by its mean metric."},
      "action": {"type": "string", "enum": ["mask", "clamp"], "default": "mask", "doc": "Drop out-of-bound tokens from the loss, or clamp their weight."},
      "metric": {"type": "string", "enum": ["ratio", "kl_k1", "kl_k2", "kl_k3"], "default": "ratio", "doc": "What is bounded."},
      "upper": {"type": "number", "default": 5.0, "doc": "Upper bound of the metric."},
      "lower": {"type": "number", "default": 0.0, "minimum": 0, "doc": "Lower bound of the ratio (mask: 0 disables; clamp: the floor)."}}}
  }})";

  explicit PpoFamily(const sdk::CreateContext& ctx) {
    const json c = sdk::parse_object(ctx.config_json(), std::string(kName) + ": config");
    adv_.reward_bias = number_or(c, "reward_bias", 0.0);
    adv_.reward_scaling = number_or(c, "reward_scaling", 1.0);
    adv_.reward_clip = number_or(c, "reward_clip", 20.0);
    adv_.reward_norm = norm_of(c.contains("reward_norm") ? c["reward_norm"] : json::parse(AREAL_REWARD_NORM_DEFAULT));
    adv_.adv_norm = norm_of(c.value("adv_norm", json()));
    adv_.kl_ctl = number_or(c, "kl_ctl", 0.0);
    const std::string est = c.value("kl_estimator", std::string("k1"));
    adv_.kl_estimator = est == "k2" ? ppo::KlEstimator::kK2 : est == "k3" ? ppo::KlEstimator::kK3 : ppo::KlEstimator::kK1;
    adv_.discount = number_or(c, "discount", 1.0);
    adv_.gae_lambda = number_or(c, "gae_lambda", 1.0);
    loss_.eps_clip = number_or(c, "eps_clip", 0.2);
    loss_.eps_clip_higher = number_or(c, "eps_clip_higher", -1.0);  // null: eps_clip
    loss_.c_clip = number_or(c, "c_clip", 0.0);
    loss_.decoupled = c.value("use_decoupled_loss", std::string(AREAL_DECOUPLED_DEFAULT) == "true");
    loss_.prox_loglinear = c.value("prox_logp_method", std::string("recompute")) == "loglinear";
    loss_.sequence_ratio = c.value("importance_sampling_level", std::string("token")) == "sequence";
    const json rs = c.value("rejection_sampling", json());
    if (!rs.is_null()) {
      if (!loss_.decoupled)
        throw sdk::invalid_argument(std::string(kName) + ": rejection_sampling needs use_decoupled_loss: true (it bounds pi_prox / pi_behave)");
      auto& r = loss_.rejection;
      r.enabled = true;
      r.sequence_level = rs.value("level", std::string("token")) == "sequence";
      r.clamp = rs.value("action", std::string("mask")) == "clamp";
      r.metric = rs.value("metric", std::string("ratio"));
      r.upper = rs.value("upper", 5.0);
      r.lower = rs.value("lower", 0.0);
      if (r.metric == "ratio" && r.upper <= 1.0)
        throw sdk::invalid_argument(std::string(kName) + ": rejection_sampling.upper must be > 1 for metric ratio");
      if (r.clamp && r.metric != "ratio")
        throw sdk::invalid_argument(std::string(kName) + ": rejection_sampling action clamp works on metric ratio only");
      if (r.lower > 0 && r.lower >= r.upper)
        throw sdk::invalid_argument(std::string(kName) + ": rejection_sampling.lower must be below upper");
    }
  }

  void compute_advantages(const areal_tensor_map& batch, const areal_tensor_map& out) {
    size_t B = 0, B1 = 0, T = 0, n = 0;
    ppo::AdvantageInputs in;
    in.rewards = vector_of<float>(batch, "rewards", kDLFloat, &B);
    in.cu_seqlens = vector_of<int32_t>(batch, "cu_seqlens", kDLInt, &B1);
    in.loss_mask = vector_of<int32_t>(batch, "loss_mask", kDLInt, &T);
    in.group_ids = vector_of<int64_t>(batch, "group_ids", kDLInt, &n);
    if (B1 != B + 1 || n != B) throw sdk::invalid_argument("rewards [B], group_ids [B] and cu_seqlens [B+1] disagree on B");
    in.batch = B, in.tokens = T;
    in.old_logprobs = token_vector(batch, find(batch, "prox_logprobs") ? "prox_logprobs" : "logprobs", T);
    if (find(batch, "ref_logprobs")) in.ref_logprobs = token_vector(batch, "ref_logprobs", T);
    size_t t_out = 0;
    float* adv = vector_of<float>(out, "advantages", kDLFloat, &t_out);
    if (t_out != T) throw sdk::invalid_argument("advantages and loss_mask differ in length");
    const std::vector<float> a = ppo::compute_advantages(adv_, in);
    std::copy(a.begin(), a.end(), adv);
  }

  double loss(const areal_tensor_map& batch, DLTensor& grad, std::string& stats) {
    size_t T = 0, B1 = 0;
    ppo::LossInputs in;
    in.loss_mask = vector_of<int32_t>(batch, "loss_mask", kDLInt, &T);
    in.cu_seqlens = vector_of<int32_t>(batch, "cu_seqlens", kDLInt, &B1);
    if (B1 == 0) throw sdk::invalid_argument("cu_seqlens must have at least one element");
    in.batch = B1 - 1, in.tokens = T;
    in.new_logprobs = token_vector(batch, "new_logprobs", T);
    in.behave_logprobs = token_vector(batch, "logprobs", T);
    in.advantages = token_vector(batch, "advantages", T);
    if (find(batch, "prox_logprobs")) in.prox_logprobs = token_vector(batch, "prox_logprobs", T);
    if (find(batch, "versions")) {
      size_t tv = 0;
      in.versions = vector_of<int64_t>(batch, "versions", kDLInt, &tv);
      if (tv != T) throw sdk::invalid_argument("versions and loss_mask differ in length");
    }
    if (const DLTensor* pv = find(batch, "policy_version")) {
      if (pv->ndim != 0 || pv->dtype.code != kDLInt || pv->dtype.bits != 64)
        throw sdk::invalid_argument("policy_version must be an int64 scalar (0-d tensor)");
      in.policy_version = *reinterpret_cast<const int64_t*>(static_cast<const char*>(pv->data) + pv->byte_offset);
    }
    if (grad.ndim != 1 || static_cast<size_t>(grad.shape[0]) != T || grad.dtype.code != kDLFloat || grad.dtype.bits != 32)
      throw sdk::invalid_argument("grad must be float32 with the length of new_logprobs");
    const ppo::LossResult r = ppo::policy_loss(loss_, in);
    float* g = reinterpret_cast<float*>(static_cast<char*>(grad.data) + grad.byte_offset);
    std::copy(r.grad.begin(), r.grad.end(), g);
    stats = json{{"pg_loss", r.loss},
                 {"clip_fraction", r.clip_fraction},
                 {"dual_clip_fraction", r.dual_clip_fraction},
                 {"rejected_fraction", r.rejected_fraction},
                 {"importance_weight", r.importance_weight_mean},
                 {"approx_kl", r.approx_kl},
                 {"advantage_mean", r.advantage_mean},
                 {"ratio_max", r.ratio_max},
                 {"loss_tokens", r.loss_tokens}}
                .dump();
    return r.loss;
  }

 private:
  static const float* token_vector(const areal_tensor_map& batch, const char* name, size_t T) {
    size_t n = 0;
    const float* p = vector_of<float>(batch, name, kDLFloat, &n);
    if (n != T) throw sdk::invalid_argument(std::string("'") + name + "' and loss_mask differ in length");
    return p;
  }

  ppo::AdvantageConfig adv_;
  ppo::LossConfig loss_;
};

}  // namespace

AREAL_EXPORT_ALGORITHM(PpoFamily)
