// Token rows for the prefix-sharing tests (issue #36): deterministic runs of
// ids, joined into rows that share prefixes as groups and sessions do.
#pragma once

#include <cstdint>
#include <vector>

namespace areal::testing {

using Rows = std::vector<std::vector<int32_t>>;

// n ids from `from`, stepping by 37 within a 300-id vocabulary.
inline std::vector<int32_t> token_run(int32_t from, int n) {
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) out.push_back((from + 37 * i) % 300);
  return out;
}

// a followed by b.
inline std::vector<int32_t> operator+(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace areal::testing
