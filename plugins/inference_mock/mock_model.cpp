#include "mock_model.hpp"

#include <algorithm>
#include <numeric>

namespace areal::mock {

int32_t sample(const std::vector<double>& raw, float temperature, int32_t top_k, float top_p, SplitMix64& rng) {
  const int32_t n = static_cast<int32_t>(raw.size());
  if (temperature <= 0.0f) return static_cast<int32_t>(std::max_element(raw.begin(), raw.end()) - raw.begin());
  std::vector<int32_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  // Stable: equal probabilities keep id order, so results are reproducible.
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return raw[a] > raw[b]; });
  int32_t keep = (top_k > 0 && top_k < n) ? top_k : n;
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
    double s = std::accumulate(p.begin(), p.begin() + keep, 0.0);
    for (int32_t i = 0; i < keep; ++i) p[i] /= s;
  }
  double u = rng.uniform(), cum = 0;
  for (int32_t i = 0; i < keep; ++i) {
    cum += p[i];
    if (u < cum) return order[i];
  }
  return order[keep - 1];
}

}  // namespace areal::mock
