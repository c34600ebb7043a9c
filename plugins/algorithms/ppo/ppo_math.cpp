#include "ppo_math.hpp"

#include <algorithm>
#include <cmath>
#include <map>

#include "areal/sdk.hpp"

namespace areal::ppo {

namespace {

void check_cu(size_t B, size_t T, const int32_t* cu) {
  if (cu == nullptr) throw sdk::invalid_argument("cu_seqlens is required");
  if (cu[0] != 0 || static_cast<size_t>(cu[B]) != T)
    throw sdk::invalid_argument("cu_seqlens must start at 0 and end at the token count " + std::to_string(T));
  for (size_t b = 0; b < B; ++b)
    if (cu[b + 1] < cu[b]) throw sdk::invalid_argument("cu_seqlens must be non-decreasing");
}

// Scope ids for one normalisation level: everything in scope 0 (batch), or
// one scope per group id.
std::vector<int64_t> scopes(Level level, const std::vector<int64_t>& group_of) {
  if (level == Level::kGroup) return group_of;
  return std::vector<int64_t>(group_of.size(), 0);
}

}  // namespace

double kl_estimate(KlEstimator k, double logp, double ref_logp, bool clamp) {
  const double d = logp - ref_logp;
  double v = 0;
  switch (k) {
    case KlEstimator::kK1: v = d; break;
    case KlEstimator::kK2: v = 0.5 * d * d; break;
    case KlEstimator::kK3: v = std::exp(-d) - 1.0 + d; break;
  }
  return clamp ? std::clamp(v, -10.0, 10.0) : v;
}

void normalize(const NormConfig& cfg, std::vector<double>& x, const std::vector<int64_t>& group_of,
               const std::vector<char>& valid) {
  if (!cfg.enabled) return;
  const size_t n = x.size();
  // Per-scope sums; statistics always in double.
  struct Acc {
    double sum = 0, sq = 0;
    size_t n = 0;
  };
  auto accumulate = [&](const std::vector<int64_t>& scope) {
    std::map<int64_t, Acc> acc;
    for (size_t i = 0; i < n; ++i)
      if (valid[i]) {
        Acc& a = acc[scope[i]];
        a.sum += x[i], a.sq += x[i] * x[i], ++a.n;
      }
    return acc;
  };
  std::vector<double> mean(n, 0.0), stdv(n, 1.0);
  if (cfg.mean_level != Level::kNone) {
    const auto scope = scopes(cfg.mean_level, group_of);
    const auto acc = accumulate(scope);
    for (size_t i = 0; i < n; ++i) {
      if (!valid[i]) continue;
      const Acc& a = acc.at(scope[i]);
      if (cfg.mean_leave1out) mean[i] = a.n < 2 ? x[i] : (a.sum - x[i]) / static_cast<double>(a.n - 1);
      else mean[i] = a.sum / static_cast<double>(a.n);
    }
  }
  if (cfg.std_level != Level::kNone) {
    // As AReaL: the spread of each element around its own mean (the
    // leave-one-out one, or 0 with no mean level), summed over the scope.
    const auto scope = scopes(cfg.std_level, group_of);
    std::map<int64_t, Acc> acc;
    for (size_t i = 0; i < n; ++i)
      if (valid[i]) {
        Acc& a = acc[scope[i]];
        a.sq += (x[i] - mean[i]) * (x[i] - mean[i]), ++a.n;
      }
    for (size_t i = 0; i < n; ++i) {
      if (!valid[i]) continue;
      const Acc& a = acc.at(scope[i]);
      if (a.n < 2) continue;  // std of one element: leave the scale alone
      const double sd = std::sqrt(a.sq / static_cast<double>(cfg.std_unbiased ? a.n - 1 : a.n)) + cfg.eps;
      if (sd > 0) stdv[i] = sd;  // equal values with eps 0: centred to 0, not 0/0
    }
  }
  for (size_t i = 0; i < n; ++i) x[i] = valid[i] ? (x[i] - mean[i]) / stdv[i] : 0.0;
}

std::vector<float> compute_advantages(const AdvantageConfig& cfg, const AdvantageInputs& in) {
  const size_t B = in.batch, T = in.tokens;
  check_cu(B, T, in.cu_seqlens);
  if (in.rewards == nullptr || in.loss_mask == nullptr || in.group_ids == nullptr)
    throw sdk::invalid_argument("rewards, loss_mask and group_ids are required");
  if (cfg.kl_ctl != 0.0 && (in.ref_logprobs == nullptr || in.old_logprobs == nullptr))
    throw sdk::invalid_argument("kl_ctl > 0 needs 'ref_logprobs' in the batch (configure a reference model) and 'logprobs'");

  // 1. Sequence scores: bias, scale, clip, then reward normalisation over rows.
  std::vector<double> score(B);
  for (size_t b = 0; b < B; ++b) {
    if (!std::isfinite(in.rewards[b])) throw sdk::invalid_argument("reward of sequence " + std::to_string(b) + " is not finite");
    score[b] = std::clamp((in.rewards[b] + cfg.reward_bias) * cfg.reward_scaling, -cfg.reward_clip, cfg.reward_clip);
  }
  const std::vector<int64_t> groups(in.group_ids, in.group_ids + B);
  normalize(cfg.reward_norm, score, groups, std::vector<char>(B, 1));

  // 2. Per-token rewards and discounted returns over loss tokens only.
  std::vector<double> adv(T, 0.0);
  const double gl = cfg.discount * cfg.gae_lambda;
  for (size_t b = 0; b < B; ++b) {
    const int32_t s = in.cu_seqlens[b], e = in.cu_seqlens[b + 1];
    bool last = true;
    double running = 0;
    for (int32_t t = e - 1; t >= s; --t) {
      if (in.loss_mask[t] == 0) continue;
      double r = 0;
      if (cfg.kl_ctl != 0.0) r -= cfg.kl_ctl * kl_estimate(cfg.kl_estimator, in.old_logprobs[t], in.ref_logprobs[t]);
      if (last) r += score[b], last = false;
      running = r + gl * running;
      adv[t] = running;
    }
  }

  // 3. Advantage normalisation over loss tokens (groups via each token's row).
  if (cfg.adv_norm.enabled) {
    std::vector<int64_t> token_group(T, 0);
    std::vector<char> valid(T, 0);
    for (size_t b = 0; b < B; ++b)
      for (int32_t t = in.cu_seqlens[b]; t < in.cu_seqlens[b + 1]; ++t) token_group[t] = groups[b], valid[t] = in.loss_mask[t] != 0;
    normalize(cfg.adv_norm, adv, token_group, valid);
  }
  return std::vector<float>(adv.begin(), adv.end());
}

LossResult policy_loss(const LossConfig& cfg, const LossInputs& in) {
  const size_t B = in.batch, T = in.tokens;
  check_cu(B, T, in.cu_seqlens);
  if (in.loss_mask == nullptr || in.new_logprobs == nullptr || in.behave_logprobs == nullptr || in.advantages == nullptr)
    throw sdk::invalid_argument("loss_mask, new_logprobs, logprobs and advantages are required");
  if (cfg.decoupled && !cfg.prox_loglinear && in.prox_logprobs == nullptr)
    throw sdk::invalid_argument(
        "the decoupled loss needs 'prox_logprobs': set trainer.recompute_logprob: true, or prox_logp_method: loglinear");
  if (cfg.decoupled && cfg.prox_loglinear && (in.versions == nullptr || in.policy_version < 0))
    throw sdk::invalid_argument("prox_logp_method loglinear needs 'versions' and 'policy_version' in the batch");

  LossResult out;
  out.grad.assign(T, 0.0f);
  // Proximal log-probs and behaviour importance weights per token.
  std::vector<double> prox(T, 0.0), weight(T, 1.0);
  std::vector<char> keep(T, 0);
  size_t n_mask = 0;
  for (size_t t = 0; t < T; ++t) {
    keep[t] = in.loss_mask[t] != 0;
    n_mask += keep[t];
    const double behave = in.behave_logprobs[t];
    if (!cfg.decoupled) {
      prox[t] = in.prox_logprobs != nullptr ? in.prox_logprobs[t] : behave;
    } else if (!cfg.prox_loglinear) {
      prox[t] = in.prox_logprobs[t];
    } else {
      // log pi_prox ~ log pi_behave + alpha (log pi_theta - log pi_behave), with
      // alpha = (v_theta - 1 - v_behave) / (v_theta - v_behave) clamped to [0, 1]:
      // how far the proximal policy (one version behind theta) sits between them.
      const int64_t v = in.versions[t];
      double alpha = 0;
      if (v >= 0 && in.policy_version > v)
        alpha = std::clamp(static_cast<double>(in.policy_version - 1 - v) / static_cast<double>(in.policy_version - v), 0.0, 1.0);
      prox[t] = behave + alpha * (in.new_logprobs[t] - behave);
    }
    if (cfg.decoupled) weight[t] = std::exp(prox[t] - behave);
  }
  out.loss_tokens = n_mask;
  if (n_mask == 0) return out;

  // Rejection sampling on pi_prox / pi_behave (decoupled only).
  size_t rejected = 0;
  if (cfg.decoupled && cfg.rejection.enabled) {
    const RejectionConfig& rc = cfg.rejection;
    auto metric_of = [&](size_t t) {
      const double d = prox[t] - in.behave_logprobs[t];
      if (rc.metric == "ratio") return d;  // compared in log space below
      // AReaL's KLEstimator(log_probs=prox, log_probs_base=behave), unclamped:
      // k1 is log(pi_prox / pi_behave), so `upper` bounds that ratio.
      if (rc.metric == "kl_k1") return kl_estimate(KlEstimator::kK1, prox[t], in.behave_logprobs[t], false);
      if (rc.metric == "kl_k2") return kl_estimate(KlEstimator::kK2, prox[t], in.behave_logprobs[t], false);
      return kl_estimate(KlEstimator::kK3, prox[t], in.behave_logprobs[t], false);
    };
    const bool ratio = rc.metric == "ratio";
    auto out_of_bounds = [&](double m) {
      if (ratio) return std::exp(m) > rc.upper || (rc.lower > 0 && std::exp(m) < rc.lower);
      return m > rc.upper;
    };
    for (size_t b = 0; b < B; ++b) {
      const int32_t s = in.cu_seqlens[b], e = in.cu_seqlens[b + 1];
      if (rc.sequence_level) {
        // Sequence metric: mean over loss tokens (the geometric mean ratio for "ratio").
        double sum = 0;
        size_t n = 0;
        for (int32_t t = s; t < e; ++t)
          if (keep[t]) sum += metric_of(t), ++n;
        if (n == 0) continue;
        const double m = sum / static_cast<double>(n);
        for (int32_t t = s; t < e; ++t) {
          if (!keep[t]) continue;
          if (rc.clamp) weight[t] = std::clamp(std::exp(m), rc.lower, rc.upper);
          else if (ratio) weight[t] = std::exp(m);
          if (!rc.clamp && out_of_bounds(m)) keep[t] = 0, ++rejected;
        }
      } else {
        for (int32_t t = s; t < e; ++t) {
          if (!keep[t]) continue;
          if (rc.clamp) weight[t] = std::clamp(weight[t], rc.lower, rc.upper);
          else if (out_of_bounds(metric_of(t))) keep[t] = 0, ++rejected;
        }
      }
    }
  }

  // Importance ratios, token level or one per sequence (GSPO).
  std::vector<double> ratio(T, 1.0), adv(T, 0.0);
  std::vector<size_t> seq_len(B, 0);
  for (size_t b = 0; b < B; ++b) {
    const int32_t s = in.cu_seqlens[b], e = in.cu_seqlens[b + 1];
    if (!cfg.sequence_ratio) {
      for (int32_t t = s; t < e; ++t) ratio[t] = std::exp(in.new_logprobs[t] - prox[t]), adv[t] = in.advantages[t];
      continue;
    }
    double dsum = 0, asum = 0;
    size_t n = 0;
    for (int32_t t = s; t < e; ++t)  // the tokens rejection kept, as AReaL's mask after rejection
      if (keep[t]) dsum += in.new_logprobs[t] - prox[t], asum += in.advantages[t], ++n;
    seq_len[b] = n;
    const double r = n ? std::exp(dsum / static_cast<double>(n)) : 1.0, a = n ? asum / static_cast<double>(n) : 0.0;
    for (int32_t t = s; t < e; ++t) ratio[t] = r, adv[t] = a;
  }

  const double lo = 1.0 - cfg.eps_clip, hi = 1.0 + (cfg.eps_clip_higher >= 0 ? cfg.eps_clip_higher : cfg.eps_clip);
  const double N = static_cast<double>(n_mask);  // the original mask count, rejected tokens included
  double loss = 0, wsum = 0, kl = 0, asum = 0;
  size_t clipped = 0, dual = 0;
  std::vector<double> dpg_dratio(T, 0.0);  // d(w * pg) / d ratio, per kept token
  for (size_t t = 0; t < T; ++t) {
    if (!keep[t]) continue;
    const double A = adv[t], r = ratio[t];
    const double unclipped = -A * r, clipped_term = -A * std::clamp(r, lo, hi);
    double pg = std::max(unclipped, clipped_term);
    double d = unclipped >= clipped_term ? -A : 0.0;  // the clipped branch is flat in r
    if (clipped_term > unclipped) ++clipped;
    if (cfg.c_clip > 0 && A < 0 && -cfg.c_clip * A < pg) {
      pg = -cfg.c_clip * A, d = 0.0;
      ++dual;
    }
    loss += weight[t] * pg;
    dpg_dratio[t] = weight[t] * d;
    wsum += weight[t], kl += prox[t] - in.new_logprobs[t], asum += A;
    out.ratio_max = std::max(out.ratio_max, r);
  }
  // Chain rule to new_logprobs: token ratio dr/dnew_t = r_t; sequence ratio
  // r = exp(mean(new - prox)) gives dr/dnew_t = r / n for each loss token.
  for (size_t b = 0; b < B; ++b) {
    const int32_t s = in.cu_seqlens[b], e = in.cu_seqlens[b + 1];
    if (!cfg.sequence_ratio) {
      for (int32_t t = s; t < e; ++t) out.grad[t] = static_cast<float>(dpg_dratio[t] * ratio[t] / N);
      continue;
    }
    if (seq_len[b] == 0) continue;
    double sum = 0;
    for (int32_t t = s; t < e; ++t) sum += dpg_dratio[t];
    const double g = sum * ratio[s] / static_cast<double>(seq_len[b]) / N;
    for (int32_t t = s; t < e; ++t)
      if (keep[t]) out.grad[t] = static_cast<float>(g);
  }
  const size_t kept = n_mask - rejected;
  out.loss = loss / N;
  out.clip_fraction = static_cast<double>(clipped) / N;
  out.dual_clip_fraction = static_cast<double>(dual) / N;
  out.rejected_fraction = static_cast<double>(rejected) / N;
  out.importance_weight_mean = kept ? wsum / static_cast<double>(kept) : 1.0;
  out.approx_kl = kept ? kl / static_cast<double>(kept) : 0.0;
  out.advantage_mean = kept ? asum / static_cast<double>(kept) : 0.0;
  return out;
}

}  // namespace areal::ppo
