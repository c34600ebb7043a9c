// The mock's "model": a bigram distribution defined by a hash, so tests can
// recompute every logprob independently.
//
//   logit(next = j | previous token p) = ((p * 31 + j * 17 + weights_seed * 7) mod 97) / 10
//   p(j | p) = softmax over j in [0, vocab_size)
//
// Reported logprobs are log p(j | p) at temperature 1 (the raw distribution),
// whatever temperature was used to sample, as the ABI requires.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

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

// splitmix64: a tiny, well-mixed PRNG so seeded sampling is reproducible
// across platforms (std:: distributions are not).
struct SplitMix64 {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  double uniform() { return (next() >> 11) * (1.0 / 9007199254740992.0); }  // [0, 1)
};

// Samples one token from a raw log-prob row with temperature, top-k, top-p.
// temperature 0 is greedy (ties go to the lowest id).
int32_t sample(const std::vector<double>& raw_logprobs, float temperature, int32_t top_k, float top_p, SplitMix64& rng);

}  // namespace areal::mock
