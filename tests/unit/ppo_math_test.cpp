// The PPO family's formulas on small tensors whose answers are worked out by
// hand in the comments (docs/algorithms.md states the same formulas).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>
#include <algorithm>

#include "areal/sdk.hpp"
#include "ppo_math.hpp"

namespace {

using namespace areal::ppo;

// Two groups of two one-token sequences: rewards 1, 0 (group 7) and 3, 1 (group 9).
struct FourRows {
  std::vector<float> rewards{1, 0, 3, 1};
  std::vector<int32_t> cu{0, 1, 2, 3, 4};
  std::vector<int32_t> mask{1, 1, 1, 1};
  std::vector<int64_t> groups{7, 7, 9, 9};
  AdvantageInputs in() {
    AdvantageInputs a;
    a.batch = 4, a.tokens = 4;
    a.rewards = rewards.data(), a.cu_seqlens = cu.data(), a.loss_mask = mask.data(), a.group_ids = groups.data();
    return a;
  }
};

TEST(PpoMath, KlEstimators) {
  // logp = -1, ref = -2: d = 1.
  EXPECT_DOUBLE_EQ(kl_estimate(KlEstimator::kK1, -1, -2), 1.0);
  EXPECT_DOUBLE_EQ(kl_estimate(KlEstimator::kK2, -1, -2), 0.5);
  EXPECT_NEAR(kl_estimate(KlEstimator::kK3, -1, -2), std::exp(-1.0) - 1 + 1, 1e-15);  // e^-1
  EXPECT_DOUBLE_EQ(kl_estimate(KlEstimator::kK1, 0, -30), 10.0);                      // clamped
}

TEST(PpoMath, GrpoGroupMeanAndStdUseGroupIds) {
  FourRows r;
  // Interleave the groups: a fixed stride of 2 would pair rows wrongly.
  r.rewards = {1, 3, 0, 1};
  r.groups = {7, 9, 7, 9};
  AdvantageConfig c;
  c.reward_norm.enabled = true;
  c.reward_norm.mean_level = c.reward_norm.std_level = Level::kGroup;
  c.reward_norm.eps = 0;
  const auto a = compute_advantages(c, r.in());
  // Group 7: {1, 0}, mean 0.5, unbiased std sqrt(0.5) -> +-0.5/0.70711 = +-0.70711.
  // Group 9: {3, 1}, mean 2, std sqrt(2) -> +-1/1.41421 = +-0.70711.
  EXPECT_NEAR(a[0], 0.7071068, 1e-6);
  EXPECT_NEAR(a[2], -0.7071068, 1e-6);
  EXPECT_NEAR(a[1], 0.7071068, 1e-6);
  EXPECT_NEAR(a[3], -0.7071068, 1e-6);
}

TEST(PpoMath, DrGrpoSubtractsGroupMeanOnly) {
  FourRows r;
  AdvantageConfig c;
  c.reward_norm.enabled = true;
  c.reward_norm.mean_level = Level::kGroup;
  c.reward_norm.std_level = Level::kNone;
  const auto a = compute_advantages(c, r.in());
  EXPECT_FLOAT_EQ(a[0], 0.5f);
  EXPECT_FLOAT_EQ(a[1], -0.5f);
  EXPECT_FLOAT_EQ(a[2], 1.0f);
  EXPECT_FLOAT_EQ(a[3], -1.0f);
}

TEST(PpoMath, RlooLeaveOneOutBaseline) {
  FourRows r;
  r.rewards = {1, 0, 3, 1};
  r.groups = {7, 7, 7, 9};  // group 7 has three rows, group 9 one
  AdvantageConfig c;
  c.reward_norm.enabled = true;
  c.reward_norm.mean_level = Level::kGroup;
  c.reward_norm.mean_leave1out = true;
  c.reward_norm.std_level = Level::kNone;
  const auto a = compute_advantages(c, r.in());
  // 1 - (0+3)/2 = -0.5; 0 - (1+3)/2 = -2; 3 - (1+0)/2 = 2.5; a lone row gets 0.
  EXPECT_FLOAT_EQ(a[0], -0.5f);
  EXPECT_FLOAT_EQ(a[1], -2.0f);
  EXPECT_FLOAT_EQ(a[2], 2.5f);
  EXPECT_FLOAT_EQ(a[3], 0.0f);
}

TEST(PpoMath, BatchNormalisationBiasScaleClip) {
  FourRows r;
  AdvantageConfig c;
  c.reward_bias = -0.5, c.reward_scaling = 10, c.reward_clip = 20;
  // (1-.5)*10=5, (0-.5)*10=-5, (3-.5)*10=25 -> clipped 20, (1-.5)*10=5.
  auto a = compute_advantages(c, r.in());
  EXPECT_FLOAT_EQ(a[0], 5);
  EXPECT_FLOAT_EQ(a[1], -5);
  EXPECT_FLOAT_EQ(a[2], 20);
  EXPECT_FLOAT_EQ(a[3], 5);
  c.reward_norm.enabled = true;  // batch mean 6.25, biased std over {5,-5,20,5}
  c.reward_norm.std_unbiased = false;
  c.reward_norm.eps = 0;
  a = compute_advantages(c, r.in());
  const double sd = std::sqrt(((5 - 6.25) * (5 - 6.25) * 2 + (-5 - 6.25) * (-5 - 6.25) + (20 - 6.25) * (20 - 6.25)) / 4);
  EXPECT_NEAR(a[1], (-5 - 6.25) / sd, 1e-6);
  EXPECT_NEAR(a[2], (20 - 6.25) / sd, 1e-6);
}

TEST(PpoMath, ScorePlacedOnLastLossTokenAndDiscountedBackwards) {
  // One row: prompt (2 tokens), output a, a masked gap token, output b, c.
  std::vector<float> rewards{2};
  std::vector<int32_t> cu{0, 6}, mask{0, 0, 1, 0, 1, 1};
  std::vector<int64_t> groups{0};
  AdvantageInputs in;
  in.batch = 1, in.tokens = 6, in.rewards = rewards.data(), in.cu_seqlens = cu.data(), in.loss_mask = mask.data(),
  in.group_ids = groups.data();
  AdvantageConfig c;
  c.discount = 0.5;
  auto a = compute_advantages(c, in);
  // Returns over loss tokens only: c = 2, b = 0.5*2 = 1, a = 0.5*1 = 0.5; gaps are 0.
  EXPECT_EQ(a, (std::vector<float>{0, 0, 0.5f, 0, 1, 2}));
  // KL penalty in the reward: old - ref = 0.2 per loss token, kl_ctl 0.1, k1.
  std::vector<float> old_lp{0, 0, -1.0f, 0, -1.0f, -1.0f}, ref_lp{0, 0, -1.2f, 0, -1.2f, -1.2f};
  in.old_logprobs = old_lp.data(), in.ref_logprobs = ref_lp.data();
  c.kl_ctl = 0.1, c.discount = 1.0;
  a = compute_advantages(c, in);
  // r = -0.02 each, +2 on the last: returns c = 1.98, b = 1.96, a = 1.94.
  EXPECT_NEAR(a[5], 1.98, 1e-6);
  EXPECT_NEAR(a[4], 1.96, 1e-6);
  EXPECT_NEAR(a[2], 1.94, 1e-6);
  in.ref_logprobs = nullptr;
  EXPECT_THROW(compute_advantages(c, in), areal::sdk::Error);
}

TEST(PpoMath, AdvantageNormalisationOverLossTokensOnly) {
  std::vector<float> rewards{1, 3};
  std::vector<int32_t> cu{0, 3, 5}, mask{0, 1, 1, 0, 1};
  std::vector<int64_t> groups{0, 1};
  AdvantageInputs in;
  in.batch = 2, in.tokens = 5, in.rewards = rewards.data(), in.cu_seqlens = cu.data(), in.loss_mask = mask.data(),
  in.group_ids = groups.data();
  AdvantageConfig c;
  c.adv_norm.enabled = true;
  c.adv_norm.std_level = Level::kNone;
  // Loss-token advantages {1, 1, 3}: mean 5/3.
  const auto a = compute_advantages(c, in);
  EXPECT_FLOAT_EQ(a[0], 0);
  EXPECT_NEAR(a[1], 1 - 5.0 / 3, 1e-6);
  EXPECT_NEAR(a[4], 3 - 5.0 / 3, 1e-6);
  EXPECT_FLOAT_EQ(a[3], 0);
}

// One sequence of 4 loss tokens with chosen ratios around the clip range.
struct FourTokens {
  std::vector<int32_t> cu{0, 4}, mask{1, 1, 1, 1};
  std::vector<float> behave{-1, -1, -1, -1};
  std::vector<float> fresh;
  std::vector<float> adv{1, 1, -1, -1};
  LossInputs in() {
    LossInputs l;
    l.batch = 1, l.tokens = 4, l.cu_seqlens = cu.data(), l.loss_mask = mask.data(), l.new_logprobs = fresh.data(),
    l.behave_logprobs = behave.data(), l.advantages = adv.data();
    return l;
  }
};

TEST(PpoMath, ClippedLossAndGradient) {
  FourTokens f;
  const double up = std::log(1.5), down = std::log(0.5);
  // ratios 1.5 (A>0: clipped to 1.2), 1.1 (A>0: inside), 0.5 (A<0: clipped to 0.8), 1.1 (A<0: inside).
  f.fresh = {float(-1 + up), float(-1 + std::log(1.1)), float(-1 + down), float(-1 + std::log(1.1))};
  LossConfig c;
  const auto r = policy_loss(c, f.in());
  const double r1 = std::exp(double(f.fresh[1]) + 1), r3 = std::exp(double(f.fresh[3]) + 1);
  // pg = max(-A r, -A clip(r)): -1.2, -r1, +0.8, +r3; mean over 4.
  EXPECT_NEAR(r.loss, (-1.2 - r1 + 0.8 + r3) / 4, 1e-6);
  // Gradient -A r / N where the unclipped term is active, 0 where clipped.
  EXPECT_FLOAT_EQ(r.grad[0], 0.0f);
  EXPECT_NEAR(r.grad[1], -r1 / 4, 1e-6);
  EXPECT_FLOAT_EQ(r.grad[2], 0.0f);
  EXPECT_NEAR(r.grad[3], r3 / 4, 1e-6);
  EXPECT_DOUBLE_EQ(r.clip_fraction, 0.5);
  // Clip-higher 0.6 lets ratio 1.5 through: grad -1.5/4.
  c.eps_clip_higher = 0.6;
  EXPECT_NEAR(policy_loss(c, f.in()).grad[0], -1.5 / 4, 1e-6);
  // Clip-higher 0 is a bound like any other (no rise at all), not "unset":
  // ratio 1.1 with A > 0 is clipped at 1.0, so it has no gradient.
  c.eps_clip_higher = 0;
  const auto flat = policy_loss(c, f.in());
  EXPECT_FLOAT_EQ(flat.grad[1], 0.0f);
  EXPECT_DOUBLE_EQ(flat.clip_fraction, 0.75);
}

TEST(PpoMath, DualClipCapsNegativeAdvantageLoss) {
  FourTokens f;
  f.adv = {-1, -1, -1, -1};
  f.fresh = {float(-1 + std::log(5.0)), -1, -1, -1};  // ratio 5 with A = -1: pg = 5
  LossConfig c;
  c.c_clip = 3;
  const auto r = policy_loss(c, f.in());
  EXPECT_NEAR(r.loss, (3 + 1 + 1 + 1) / 4.0, 1e-6);  // capped at -c*A = 3
  EXPECT_FLOAT_EQ(r.grad[0], 0.0f);
  EXPECT_NEAR(r.grad[1], 1 / 4.0, 1e-6);
  EXPECT_DOUBLE_EQ(r.dual_clip_fraction, 0.25);
}

TEST(PpoMath, GradientMatchesFiniteDifferences) {
  FourTokens f;
  f.fresh = {-0.9f, -1.05f, -1.3f, -0.95f};
  f.adv = {0.7f, -0.4f, 1.3f, -2.0f};
  std::vector<float> prox{-0.95f, -1.0f, -1.1f, -1.02f};
  for (bool seq : {false, true})
    for (bool decoupled : {false, true}) {
      LossConfig c;
      c.sequence_ratio = seq, c.decoupled = decoupled, c.eps_clip = 0.15;
      LossInputs in = f.in();
      in.prox_logprobs = prox.data();
      const auto r = policy_loss(c, in);
      for (size_t t = 0; t < 4; ++t) {
        const float h = 1e-3f;
        std::vector<float> p = f.fresh, m = f.fresh;
        p[t] += h, m[t] -= h;
        LossInputs ip = in, im = in;
        ip.new_logprobs = p.data(), im.new_logprobs = m.data();
        const double fd = (policy_loss(c, ip).loss - policy_loss(c, im).loss) / (2 * h);
        EXPECT_NEAR(r.grad[t], fd, 2e-4) << "token " << t << " sequence " << seq << " decoupled " << decoupled;
      }
    }
}

TEST(PpoMath, DecoupledWeightsAndRejectionSampling) {
  FourTokens f;
  f.fresh = f.behave;  // ratio to prox handled below
  f.adv = {1, 1, 1, 1};
  // prox/behave = 2, 1, 8 (over upper 5), 0.5.
  std::vector<float> prox{float(-1 + std::log(2.0)), -1, float(-1 + std::log(8.0)), float(-1 + std::log(0.5))};
  f.fresh = prox;  // theta == prox: ratio 1 everywhere, pg = -A = -1
  LossConfig c;
  c.decoupled = true;
  LossInputs in = f.in();
  in.prox_logprobs = prox.data();
  auto r = policy_loss(c, in);
  EXPECT_NEAR(r.loss, -(2 + 1 + 8 + 0.5) / 4, 1e-5);  // unbounded weights
  c.rejection.enabled = true;                         // token mask at upper 5
  r = policy_loss(c, in);
  EXPECT_NEAR(r.loss, -(2 + 1 + 0.5) / 4, 1e-5);  // denominator keeps the original 4 tokens
  EXPECT_FLOAT_EQ(r.grad[2], 0.0f);
  EXPECT_DOUBLE_EQ(r.rejected_fraction, 0.25);
  c.rejection.clamp = true, c.rejection.lower = 0.75;  // clamp weights into [0.75, 5]
  r = policy_loss(c, in);
  EXPECT_NEAR(r.loss, -(2 + 1 + 5 + 0.75) / 4, 1e-5);
  // Sequence level: geometric mean of (2, 1, 8, 0.5) = 2^(0/4)... = (8)^(1/4) -> one weight for all.
  c.rejection.clamp = false, c.rejection.lower = 0, c.rejection.sequence_level = true;
  r = policy_loss(c, in);
  const double g = std::pow(2.0 * 1 * 8 * 0.5, 0.25);
  EXPECT_NEAR(r.loss, -g, 1e-5);
  c.rejection.upper = 1.5;  // the whole sequence is rejected
  r = policy_loss(c, in);
  EXPECT_DOUBLE_EQ(r.rejected_fraction, 1.0);
  EXPECT_DOUBLE_EQ(r.loss, 0.0);
}

// AReaL's rejection metrics are KLEstimator(log_probs=prox, base=behave),
// unclamped: kl_k1 = log(pi_prox / pi_behave), so `upper` bounds that ratio
// from above (the sign was flipped once, keeping exploding weights).
TEST(PpoMath, KlRejectionBoundsTheProximalOverBehaviourRatio) {
  FourTokens f;
  f.adv = {1, 1, 1, 1};
  std::vector<float> prox{float(-1 + std::log(20.0)), float(-1 + std::log(0.05)), -1, -1};
  f.fresh = prox;
  LossConfig c;
  c.decoupled = true;
  c.rejection.enabled = true;
  c.rejection.metric = "kl_k1";
  c.rejection.upper = 2;
  LossInputs in = f.in();
  in.prox_logprobs = prox.data();
  auto r = policy_loss(c, in);
  EXPECT_FLOAT_EQ(r.grad[0], 0.0f) << "log 20 = 3.0 > 2: the exploding weight goes";
  EXPECT_NE(r.grad[1], 0.0f) << "log 0.05 = -3.0 is kept";
  EXPECT_DOUBLE_EQ(r.rejected_fraction, 0.25);
  // k3 unclamped: weight e^4 has k3 = e^-4 - 1 + 4 = 3.02; at upper 3 it goes
  // (the old +-10 clamp could never reach an upper of 10 or more either).
  prox[0] = float(-1 + 4.0), prox[1] = -1;
  f.fresh = prox;
  in = f.in();
  in.prox_logprobs = prox.data();
  c.rejection.metric = "kl_k3", c.rejection.upper = 3;
  EXPECT_FLOAT_EQ(policy_loss(c, in).grad[0], 0.0f);
  prox[0] = float(-1 + 13.0);  // k3 = e^-13 - 1 + 13 = 12.0 > 11
  f.fresh = prox;
  in = f.in();
  in.prox_logprobs = prox.data();
  c.rejection.upper = 11;
  EXPECT_DOUBLE_EQ(policy_loss(c, in).rejected_fraction, 0.25);
}

// GSPO's sequence ratio and advantage come from the tokens rejection kept,
// and only they get gradient (AReaL builds them from the mask after rejection).
TEST(PpoMath, SequenceRatioUsesOnlyTheTokensRejectionKept) {
  FourTokens f;  // one row of 4 tokens
  f.adv = {1, 1, 1, 1};
  std::vector<float> prox{-1, float(-1 + std::log(8.0)), -1, -1};
  f.fresh = prox;
  LossConfig c;
  c.decoupled = true, c.sequence_ratio = true;
  c.rejection.enabled = true;  // token mask at upper 5: token 1 (weight 8) goes
  LossInputs in = f.in();
  in.prox_logprobs = prox.data();
  const auto r = policy_loss(c, in);
  EXPECT_FLOAT_EQ(r.grad[1], 0.0f);
  // Kept: three tokens, ratio 1, A 1, weight 1. d loss / d new_t = (3 x -1) x r / 3 kept / N 4 = -1/4 each.
  for (size_t t : {0u, 2u, 3u}) EXPECT_NEAR(r.grad[t], -1.0 / 4, 1e-6) << t;
  EXPECT_NEAR(r.loss, -3.0 / 4, 1e-6);
}

// eps 0 and a group whose rewards are all equal: centred to 0, never 0/0.
TEST(PpoMath, EqualRewardsWithEpsZeroGiveZeroNotNan) {
  FourRows r;
  r.rewards = {1, 1, 3, 1};
  AdvantageConfig c;
  c.reward_norm.enabled = true;
  c.reward_norm.mean_level = c.reward_norm.std_level = Level::kGroup;
  c.reward_norm.eps = 0;
  const auto a = compute_advantages(c, r.in());
  EXPECT_EQ(a[0], 0.0f);
  EXPECT_EQ(a[1], 0.0f);
  EXPECT_NEAR(a[2], 0.7071068, 1e-6);
}

// Leave-one-out means with a std: AReaL takes the spread of each element
// around its own leave-one-out mean. Group {0, 1, 1}: LOO means 1, 0.5, 0.5;
// centred -1, 0.5, 0.5; unbiased std sqrt(1.5 / 2) = 0.866.
TEST(PpoMath, LeaveOneOutStdIsAroundTheLeaveOneOutMeans) {
  FourRows r;
  r.rewards = {0, 1, 1, 5};
  r.groups = {7, 7, 7, 9};
  AdvantageConfig c;
  c.reward_norm.enabled = true;
  c.reward_norm.mean_level = c.reward_norm.std_level = Level::kGroup;
  c.reward_norm.mean_leave1out = true;
  c.reward_norm.eps = 0;
  const auto a = compute_advantages(c, r.in());
  EXPECT_NEAR(a[0], -1.0 / std::sqrt(0.75), 1e-6);  // -1.1547
  EXPECT_NEAR(a[1], 0.5 / std::sqrt(0.75), 1e-6);   // 0.5774
  EXPECT_NEAR(a[2], 0.5 / std::sqrt(0.75), 1e-6);
}

TEST(PpoMath, LoglinearProximalLogprobs) {
  FourTokens f;
  f.adv = {1, 1, 1, 1};
  f.fresh = {-0.5f, -0.5f, -0.5f, -0.5f};
  std::vector<int64_t> versions{4, 3, 2, 5};
  LossConfig c;
  c.decoupled = true, c.prox_loglinear = true;
  LossInputs in = f.in();
  in.versions = versions.data(), in.policy_version = 5;
  const auto r = policy_loss(c, in);
  // alpha = (5-1-v)/(5-v): v=4 -> 0, v=3 -> 1/2, v=2 -> 2/3, v=5 -> 0 (fresh).
  // prox = -1 + alpha*0.5; weight = exp(prox - behave) = exp(alpha*0.5); ratio = exp(-0.5 - prox).
  double expect = 0;
  for (double alpha : {0.0, 0.5, 2.0 / 3, 0.0}) {
    const double prox = -1 + alpha * 0.5, ratio = std::exp(-0.5 - prox), w = std::exp(alpha * 0.5);
    expect += w * std::max(-ratio, -std::clamp(ratio, 0.8, 1.2));
  }
  EXPECT_NEAR(r.loss, expect / 4, 1e-6);
  in.policy_version = -1;
  EXPECT_THROW(policy_loss(c, in), areal::sdk::Error);
}

TEST(PpoMath, DecoupledWithoutProxIsAClearError) {
  FourTokens f;
  f.fresh = f.behave;
  LossConfig c;
  c.decoupled = true;
  try {
    policy_loss(c, f.in());
    FAIL() << "expected an error";
  } catch (const areal::sdk::Error& e) {
    EXPECT_NE(std::string(e.what()).find("trainer.recompute_logprob"), std::string::npos);
  }
}

}  // namespace
