#include "batched_sampler.hpp"

#include <algorithm>
#include <tuple>
#include <vector>

#include "core/sampling/sampling.hpp"
#include "device.hpp"

namespace areal::local_inference {

bool cuts(const RowSampling& s, int64_t vocab) {
  // The host sampler's test, so both paths agree on which rows are cut.
  return s.temperature > 0 && !areal::sampling::samples_whole_distribution(static_cast<int32_t>(vocab), static_cast<float>(s.temperature),
                                                                          static_cast<int32_t>(s.top_k), static_cast<float>(s.top_p));
}

namespace {

// The cut rows' tokens: `raw` [m, V] of those rows, t [m, 1] their
// temperatures, u [m] their uniforms, k [m, 1] how many ids each keeps
// before top-p (V: all), p [m, 1] their top_p (>= 1: no cut). Sums are the
// last column of a cumulative sum, which a row computes alone, so a row's
// draw does not depend on the rows beside it (batch_invariant).
torch::Tensor cut_tokens(const torch::Tensor& raw, const torch::Tensor& t, const torch::Tensor& u, const torch::Tensor& k, const torch::Tensor& p) {
  const int64_t V = raw.size(1);
  // Descending and stable: equal log-probs keep id order, as the host's comparator has them.
  torch::Tensor sorted, order;
  std::tie(sorted, order) = raw.sort(/*stable=*/true, /*dim=*/1, /*descending=*/true);
  const torch::Tensor position = torch::arange(V, order.options()).unsqueeze(0);
  const torch::Tensor in_top_k = position < k;
  // exp(raw / T - max / T) over the kept ids, normalised (the host's arithmetic, in its order).
  const torch::Tensor w = torch::where(in_top_k, (sorted / t - sorted.narrow(1, 0, 1) / t).exp(), torch::zeros_like(sorted));
  torch::Tensor prob = w / w.cumsum(1).narrow(1, V - 1, 1);
  // top-p: an id stays while the probability before it is below top_p (the
  // smallest head reaching it; the first id always), and the head is renormalised.
  const torch::Tensor cum = prob.cumsum(1);
  const torch::Tensor before = torch::cat({torch::zeros_like(cum.narrow(1, 0, 1)), cum.narrow(1, 0, V - 1)}, 1);
  const torch::Tensor kept = in_top_k & ((p >= 1.0) | (before < p) | (position == 0));
  const torch::Tensor last = kept.sum(1, /*keepdim=*/true) - 1;
  prob = torch::where(kept, prob, torch::zeros_like(prob));
  prob = torch::where(p >= 1.0, prob, prob / cum.gather(1, last));
  // Inverse CDF over the head: the first id whose cumulative probability
  // exceeds u; rounding that leaves u past the last: the last kept id.
  const torch::Tensor at = torch::minimum(torch::searchsorted(prob.cumsum(1), u.unsqueeze(1), /*out_int32=*/false, /*right=*/true), last);
  return order.gather(1, at);
}

// Cut rows sorted together at most this many at a time: a sort and the
// passes after it hold about ten [rows, vocabulary] temporaries (311 MB
// each in float64 at 256 rows of Qwen3's vocabulary).
constexpr int64_t kCutRowsAtOnce = 32;

}  // namespace

Drawn draw_rows(const torch::Tensor& raw, const std::vector<RowSampling>& rows, bool raw_logprobs) {
  const int64_t n = raw.size(0), V = raw.size(1);
  const auto f64 = torch::TensorOptions().dtype(torch::kFloat64);
  std::vector<double> temps, uniforms, greedy;
  std::vector<int64_t> cut_rows, keep;
  std::vector<double> top_p;
  for (int64_t i = 0; i < n; ++i) {
    const RowSampling& s = rows[static_cast<size_t>(i)];
    const bool g = s.temperature <= 0;
    greedy.push_back(g ? 1.0 : 0.0);
    temps.push_back(g ? 1.0 : s.temperature);
    uniforms.push_back(g ? 0.0 : s.uniform);
    if (cuts(s, V)) {
      cut_rows.push_back(i);
      keep.push_back(s.top_k > 0 && s.top_k < V ? s.top_k : V);
      top_p.push_back(s.top_p);
    }
  }
  // Uploaded without waiting: the host queues these kernels behind the step's forward.
  using areal::torch_model::upload;
  const torch::Device device = raw.device();
  const torch::Tensor t = upload(torch::tensor(temps, f64), device).unsqueeze(1);
  const torch::Tensor u = upload(torch::tensor(uniforms, f64), device);
  // Each pass over [n, vocab] float64 reads and writes megabytes a row: the
  // division is left out when every temperature is 1 (x / 1 is x, bit for
  // bit) and the argmax when no row is greedy.
  const bool unit_temperatures = std::all_of(temps.begin(), temps.end(), [](double x) { return x == 1.0; });
  const bool any_greedy = std::any_of(greedy.begin(), greedy.end(), [](double g) { return g > 0.5; });
  const torch::Tensor max = std::get<0>(raw.max(1, /*keepdim=*/true));
  const torch::Tensor scaled = unit_temperatures ? raw - max : (raw - max) / t;  // <= 0, 0 at the mode
  const torch::Tensor cum = scaled.exp().cumsum(1);
  const torch::Tensor sum = cum.narrow(1, V - 1, 1);
  torch::Tensor tok = torch::searchsorted(cum, u.unsqueeze(1) * sum, /*out_int32=*/false, /*right=*/true).clamp_max(V - 1);
  if (!cut_rows.empty()) {
    const torch::Tensor which = upload(torch::tensor(cut_rows, torch::kInt64), device);
    const auto column = [&](const std::vector<double>& v) { return upload(torch::tensor(v, f64), device).unsqueeze(1); };
    const torch::Tensor k = upload(torch::tensor(keep, torch::kInt64), device).unsqueeze(1);
    const torch::Tensor p = column(top_p);
    std::vector<torch::Tensor> chosen;
    for (int64_t from = 0; from < which.size(0); from += kCutRowsAtOnce) {
      const int64_t m = std::min(kCutRowsAtOnce, which.size(0) - from);
      const torch::Tensor rows_here = which.narrow(0, from, m);
      chosen.push_back(cut_tokens(raw.index_select(0, rows_here), t.index_select(0, rows_here), u.index_select(0, rows_here), k.narrow(0, from, m),
                                  p.narrow(0, from, m)));
    }
    tok = tok.index_put({which}, chosen.size() == 1 ? chosen[0] : torch::cat(chosen, 0));
  }
  torch::Tensor is_greedy;
  if (any_greedy) {
    is_greedy = upload(torch::tensor(greedy, f64), device).gt(0.5).unsqueeze(1);
    tok = torch::where(is_greedy, raw.argmax(1, /*keepdim=*/true), tok);
  }
  // The log-prob under softmax(raw / T) (ABI convention), or raw (greedy, logprob_mode raw).
  const torch::Tensor lp_raw = raw.gather(1, tok), lp_scaled = scaled.gather(1, tok) - sum.log();
  torch::Tensor lp = raw_logprobs ? lp_raw : (any_greedy ? torch::where(is_greedy, lp_raw, lp_scaled) : lp_scaled);
  return Drawn{tok, lp, t};
}

}  // namespace areal::local_inference
