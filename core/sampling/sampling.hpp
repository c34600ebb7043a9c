// Token sampling shared by the inference backends: temperature, top-k and
// top-p over raw log-probs with a seeded splitmix64 generator, so the same
// seed gives the same tokens on every platform (std:: distributions do not).
#pragma once

#include <cstdint>
#include <vector>

namespace areal::sampling {

struct SplitMix64 {
  uint64_t state;
  uint64_t next();
  double uniform();  // [0, 1)
};

// Samples one token id from raw log-probabilities (temperature 1). Greedy
// when temperature is 0 (ties go to the lowest id). top_k <= 0 and
// top_p >= 1 disable those filters.
int32_t sample(const std::vector<double>& raw_logprobs, float temperature, int32_t top_k, float top_p, SplitMix64& rng);

// True when sample() draws from the whole distribution (no top-k / top-p,
// temperature > 0): a backend may then compute the weights itself, vectorised.
bool samples_whole_distribution(int32_t n, float temperature, int32_t top_k, float top_p);

// log p(token) under softmax(raw / temperature): the ABI's log-prob
// convention (the sampling distribution before top-k/top-p; temperature 0,
// greedy, counts as 1), from normalised raw log-probs.
double sampling_logprob(const double* raw_logprobs, int32_t n, float temperature, int32_t token);

// Inverse CDF in id order over n unnormalised weights summing to `sum`.
int32_t sample_from_weights(const double* weights, int32_t n, double sum, SplitMix64& rng);

}  // namespace areal::sampling
