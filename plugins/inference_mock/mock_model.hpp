// The mock's "model": a bigram distribution defined by a hash, so tests can
// recompute every logprob independently.
//
//   logit(next = j | previous token p) = ((p * 31 + j * 17 + weights_seed * 7) mod 97) / 10
//   p(j | p) = softmax over j in [0, vocab_size)
//
// Reported logprobs are log p(j | p) under softmax(logit / T) at the request's
// temperature T (1 when greedy), the ABI's convention; `logprob_mode: raw`
// reports temperature-1 values instead (for test servers that emulate a
// backend's raw mode).
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>
#include <algorithm>

#include "core/sampling/sampling.hpp"

namespace areal::mock {

inline float logit(int64_t prev, int64_t j, int64_t weights_seed) {
  int64_t h = (prev * 31 + j * 17 + weights_seed * 7) % 97;
  if (h < 0) h += 97;
  return static_cast<float>(h) / 10.0f;
}

// Raw log-softmax row for the previous token.
inline std::vector<double> log_probs(int64_t prev, int32_t vocab_size, int64_t weights_seed) {
  std::vector<double> row(vocab_size);
  double max_logit = -1e30;
  for (int32_t j = 0; j < vocab_size; ++j) {
    row[j] = logit(prev, j, weights_seed);
    max_logit = std::max(max_logit, row[j]);
  }
  double sum = 0;
  for (double v : row) sum += std::exp(v - max_logit);
  const double log_z = max_logit + std::log(sum);
  for (double& v : row) v -= log_z;
  return row;
}

using SplitMix64 = areal::sampling::SplitMix64;
using areal::sampling::sample;

}  // namespace areal::mock
