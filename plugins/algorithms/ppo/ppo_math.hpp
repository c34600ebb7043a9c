// The PPO family's formulas on plain arrays: reward shaping, normalisation,
// KL estimators, returns, and the clipped (decoupled) policy loss with its
// gradient with respect to the current log-probs. No tensors library: each
// function is a loop a reader can check against the docs
// (docs/algorithms.md) and the unit tests check against hand-computed values.
//
// Layout: a packed batch of B sequences, T tokens. cu_seqlens[B+1] bounds
// sequence b to [cu[b], cu[b+1]). Per-token arrays are aligned with the
// tokens themselves: position t holds the log-prob of token t (never shifted),
// so the loss mask, behaviour log-probs and versions line up by construction.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace areal::ppo {

enum class Level { kNone, kBatch, kGroup };
enum class KlEstimator { kK1, kK2, kK3 };

// AReaL's NormConfig. Disabled means "leave the values as they are".
struct NormConfig {
  bool enabled = false;
  Level mean_level = Level::kBatch;
  Level std_level = Level::kBatch;
  bool mean_leave1out = false;
  bool std_unbiased = true;
  double eps = 1e-5;
};

struct RejectionConfig {
  bool enabled = false;
  bool sequence_level = false;   // level: token | sequence
  bool clamp = false;            // action: mask | clamp
  std::string metric = "ratio";  // ratio | kl_k1 | kl_k2 | kl_k3
  double upper = 5.0;
  double lower = 0.0;            // ratio only; 0 = no lower bound for mask
};

struct AdvantageConfig {
  double reward_bias = 0.0, reward_scaling = 1.0, reward_clip = 20.0;
  NormConfig reward_norm;
  NormConfig adv_norm;
  double kl_ctl = 0.0;
  KlEstimator kl_estimator = KlEstimator::kK1;
  double discount = 1.0, gae_lambda = 1.0;
};

struct LossConfig {
  double eps_clip = 0.2;
  double eps_clip_higher = -1.0;  // < 0: the same as eps_clip (0 is a valid bound: no rise)
  double c_clip = 0.0;           // dual clip; 0 = off (must be > 1 when on)
  bool decoupled = false;
  bool prox_loglinear = false;   // decoupled only: approximate prox log-probs
  bool sequence_ratio = false;   // importance_sampling_level: sequence (GSPO)
  RejectionConfig rejection;
};

// The KL estimate between log-probs `logp` (sampling policy) and `ref_logp`
// (AReaL's KLEstimator(log_probs, log_probs_base)), clamped to [-10, 10]
// unless `clamp` is false: k1 = logp - ref, k2 = (logp - ref)^2 / 2,
// k3 = exp(ref - logp) - 1 - (ref - logp).
double kl_estimate(KlEstimator k, double logp, double ref_logp, bool clamp = true);

// Normalises x in place over the elements with valid[i] != 0, at batch level
// or per group (elements with the same group id; groups need not be
// contiguous). x = (x - mean) / (std + eps); a disabled level skips its part.
// With fewer than two elements in a scope, std is taken as 1 and a
// leave-one-out mean as the element itself, so a lone element maps to 0
// under mean normalisation instead of dividing by zero.
void normalize(const NormConfig& cfg, std::vector<double>& x, const std::vector<int64_t>& group_of,
               const std::vector<char>& valid);

struct AdvantageInputs {
  size_t batch = 0;                        // B
  size_t tokens = 0;                       // T
  const float* rewards = nullptr;          // [B]
  const int32_t* cu_seqlens = nullptr;     // [B+1]
  const int32_t* loss_mask = nullptr;      // [T]
  const int64_t* group_ids = nullptr;      // [B]
  const float* old_logprobs = nullptr;     // [T] for the KL reward (prox if recomputed, else behaviour)
  const float* ref_logprobs = nullptr;     // [T] or null (required when kl_ctl > 0)
};

// Per-token advantages (0 outside the loss mask): shaped and normalised
// sequence scores placed on each sequence's last loss token, KL penalties
// on every loss token, discounted returns (GAE with no critic) backwards
// over loss tokens, then advantage normalisation over loss tokens.
std::vector<float> compute_advantages(const AdvantageConfig& cfg, const AdvantageInputs& in);

struct LossInputs {
  size_t batch = 0, tokens = 0;
  const int32_t* cu_seqlens = nullptr;   // [B+1]
  const int32_t* loss_mask = nullptr;    // [T]
  const float* new_logprobs = nullptr;   // [T] current policy
  const float* behave_logprobs = nullptr;// [T] what the inference engine reported
  const float* prox_logprobs = nullptr;  // [T] recomputed before the step, or null
  const float* advantages = nullptr;     // [T]
  const int64_t* versions = nullptr;     // [T] per-token policy version (-1 = prompt), or null
  int64_t policy_version = -1;           // version of the weights being trained, or -1
};

struct LossResult {
  double loss = 0;
  std::vector<float> grad;  // dLoss / d new_logprobs
  // Diagnostics over loss tokens.
  double clip_fraction = 0, dual_clip_fraction = 0, rejected_fraction = 0;
  double importance_weight_mean = 1, approx_kl = 0, advantage_mean = 0, ratio_max = 0;
  size_t loss_tokens = 0;
};

// The policy loss of one micro-batch, a per-token mean over its loss tokens:
//   ratio = exp(new - prox), pg = max(-A*ratio, -A*clip(ratio, 1-eps, 1+eps_hi)),
//   dual clip for A < 0: pg = min(pg, -c*A); decoupled: pg *= exp(prox - behave)
//   (bounded or masked by rejection sampling). Not decoupled: prox is the
//   recomputed log-probs when given, else the behaviour ones, and weight 1.
LossResult policy_loss(const LossConfig& cfg, const LossInputs& in);

}  // namespace areal::ppo
