#include "core/sampling/sampling.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace areal::sampling {

uint64_t SplitMix64::next() {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

double SplitMix64::uniform() { return (next() >> 11) * (1.0 / 9007199254740992.0); }

double sampling_logprob(const double* raw, int32_t n, float temperature, int32_t token) {
  if (temperature <= 0.0f || temperature == 1.0f) return raw[token];
  const double t = temperature;
  double max_scaled = raw[0] / t;
  for (int32_t i = 1; i < n; ++i) max_scaled = std::max(max_scaled, raw[i] / t);
  double sum = 0;
  for (int32_t i = 0; i < n; ++i) sum += std::exp(raw[i] / t - max_scaled);
  return raw[token] / t - max_scaled - std::log(sum);
}

int32_t sample(const std::vector<double>& raw, float temperature, int32_t top_k, float top_p, SplitMix64& rng) {
  const int32_t n = static_cast<int32_t>(raw.size());
  if (temperature <= 0.0f) return static_cast<int32_t>(std::max_element(raw.begin(), raw.end()) - raw.begin());
  if (samples_whole_distribution(n, temperature, top_k, top_p)) {
    // No sort needed (a full sort of a 150k vocabulary per token is slow).
    const double max_scaled = *std::max_element(raw.begin(), raw.end()) / temperature;
    std::vector<double> w(static_cast<size_t>(n));
    double sum = 0;
    for (int32_t i = 0; i < n; ++i) sum += w[i] = std::exp(raw[i] / temperature - max_scaled);
    return sample_from_weights(w.data(), n, sum, rng);
  }
  std::vector<int32_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  int32_t keep = (top_k > 0 && top_k < n) ? top_k : n;
  // Only the kept head needs ordering; stable so equal scores keep id order.
  auto by_score = [&](int32_t a, int32_t b) { return raw[a] > raw[b] || (raw[a] == raw[b] && a < b); };
  if (keep < n) std::partial_sort(order.begin(), order.begin() + keep, order.end(), by_score);
  else std::sort(order.begin(), order.end(), by_score);
  std::vector<double> p(keep);
  double max_scaled = raw[order[0]] / temperature, sum = 0;
  for (int32_t i = 0; i < keep; ++i) sum += p[i] = std::exp(raw[order[i]] / temperature - max_scaled);
  for (double& v : p) v /= sum;
  if (top_p < 1.0f) {
    double cum = 0;
    int32_t cut = keep;
    for (int32_t i = 0; i < keep; ++i) {
      cum += p[i];
      if (cum >= top_p) {
        cut = i + 1;
        break;
      }
    }
    keep = cut;
    const double s = std::accumulate(p.begin(), p.begin() + keep, 0.0);
    for (int32_t i = 0; i < keep; ++i) p[i] /= s;
  }
  const double u = rng.uniform();
  double cum = 0;
  for (int32_t i = 0; i < keep; ++i) {
    cum += p[i];
    if (u < cum) return order[i];
  }
  return order[keep - 1];
}

bool samples_whole_distribution(int32_t n, float temperature, int32_t top_k, float top_p) {
  return temperature > 0.0f && (top_k <= 0 || top_k >= n) && top_p >= 1.0f;
}

int32_t sample_from_weights(const double* w, int32_t n, double sum, SplitMix64& rng) {
  const double target = rng.uniform() * sum;
  double cum = 0;
  for (int32_t i = 0; i < n; ++i) {
    cum += w[i];
    if (target < cum) return i;
  }
  for (int32_t i = n - 1; i >= 0; --i)  // rounding: the last id with weight
    if (w[i] > 0) return i;
  return n - 1;
}

}  // namespace areal::sampling
