// The local engine's batched sampler (plugins/inference_local/batched_sampler)
// against the per-row host sampler (core/sampling), which shares no code
// with it: for every combination of temperature, top-k and top-p, rows
// sampled together draw the token the host draws from the same row with the
// same uniform, and record the log-prob the host records.
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "batched_sampler.hpp"
#include "core/sampling/sampling.hpp"

namespace {

using areal::local_inference::RowSampling;

struct Case {
  float temperature;
  int32_t top_k;
  float top_p;
};

}  // namespace

TEST(BatchedSampler, DrawsWhatTheHostSamplerDraws) {
  const int64_t V = 3000;
  torch::manual_seed(7);
  std::vector<Case> cases;
  for (float t : {0.0f, 0.6f, 1.0f, 1.4f})
    for (int32_t k : {0, 1, 7, 60, 3000})
      for (float p : {1.0f, 0.95f, 0.5f, 0.02f}) cases.push_back({t, k, p});
  const int draws_per_case = 6;
  const int64_t n = static_cast<int64_t>(cases.size()) * draws_per_case;
  // Peaked and flat rows: logits of spread 0.5 to 6.
  const torch::Tensor spread = torch::linspace(0.5, 6.0, n, torch::kFloat64).unsqueeze(1);
  torch::Tensor logits = torch::randn({n, V}, torch::kFloat32).to(torch::kFloat64) * spread;
  // Ties at the top in some rows: the lower id comes first.
  for (int64_t r = 0; r < n; r += 5) {
    const double top = logits[r].max().item<double>() + 1.0;
    logits[r][40] = top, logits[r][12] = top, logits[r][2999] = top;
  }
  const torch::Tensor raw = torch::log_softmax(logits, 1);
  std::vector<RowSampling> rows;
  std::vector<areal::sampling::SplitMix64> rngs;
  for (int64_t r = 0; r < n; ++r) {
    const Case& c = cases[static_cast<size_t>(r / draws_per_case)];
    areal::sampling::SplitMix64 rng{static_cast<uint64_t>(1000 + r)};
    rngs.push_back(rng);  // the host's copy draws the same number
    rows.push_back({c.temperature, c.temperature <= 0 ? 0.0 : rng.uniform(), c.top_k, c.top_p});
  }
  const auto drawn = areal::local_inference::draw_rows(raw, rows, /*raw_logprobs=*/false);
  const torch::Tensor tok = drawn.tokens.contiguous(), lp = drawn.logprobs.contiguous();
  ASSERT_EQ(tok.size(0), n);
  int cut = 0, tied_first = 0;
  for (int64_t r = 0; r < n; ++r) {
    const Case& c = cases[static_cast<size_t>(r / draws_per_case)];
    const torch::Tensor row = raw[r].contiguous();
    const std::vector<double> host_row(row.data_ptr<double>(), row.data_ptr<double>() + V);
    const int32_t want = areal::sampling::sample(host_row, c.temperature, c.top_k, c.top_p, rngs[static_cast<size_t>(r)]);
    const int64_t got = tok[r][0].item<int64_t>();
    EXPECT_EQ(got, want) << "row " << r << ": T " << c.temperature << ", top_k " << c.top_k << ", top_p " << c.top_p;
    const double want_lp = areal::sampling::sampling_logprob(host_row.data(), static_cast<int32_t>(V), c.temperature, want);
    EXPECT_NEAR(lp[r][0].item<double>(), want_lp, 1e-9) << "row " << r;
    if (areal::local_inference::cuts(rows[static_cast<size_t>(r)], V)) ++cut;
    if (r % 5 == 0 && c.temperature > 0 && c.top_k == 1) {
      EXPECT_EQ(got, 12) << "row " << r << ": of three tied ids, top_k 1 keeps the lowest";
      ++tied_first;
    }
  }
  EXPECT_GT(cut, n / 2);
  EXPECT_GT(tied_first, 0);
  // Raw mode records the temperature-1 log-prob of the same tokens.
  const auto raw_mode = areal::local_inference::draw_rows(raw, rows, /*raw_logprobs=*/true);
  EXPECT_TRUE(torch::equal(raw_mode.tokens, drawn.tokens));
  EXPECT_TRUE(torch::allclose(raw_mode.logprobs, raw.gather(1, drawn.tokens), 0, 0));
}
