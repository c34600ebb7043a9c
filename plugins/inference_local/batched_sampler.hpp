// The local engine's sampler for all rows of a step at once, where the model
// runs: greedy, temperature, top-k and top-p draws that are the per-row host
// sampler's (core/sampling) from the same distribution and uniform, so a
// request draws the same tokens whichever path serves it (up to a uniform
// landing within rounding of a boundary between two tokens). Rows whose
// distribution is reshaped (penalties, logit_bias, structured output) are
// not its business: the engine samples those on the host.
#pragma once

#include <cstdint>
#include <vector>

#include <torch/types.h>

namespace areal::local_inference {

struct RowSampling {
  double temperature = 1.0;  // <= 0: greedy (the first maximum)
  double uniform = 0.0;      // the request's draw in [0, 1) (unused when greedy)
  int64_t top_k = 0;         // <= 0 or >= vocabulary: no cut
  double top_p = 1.0;        // >= 1: no cut
};

struct Drawn {
  torch::Tensor tokens;    // [rows, 1] int64
  torch::Tensor logprobs;  // [rows, 1] float64
  torch::Tensor temperatures;  // [rows, 1] float64 on the rows' device, greedy rows 1 (the temperature of their log-prob)
};

// Draws a token for each row of `raw` ([rows, vocab] float64 log-probs of
// the model's logits, on any device) with the row's parameters, without a
// host sync. The log-prob is the token's under softmax(raw / T), the whole
// tempered distribution, cut or not (what a trainer recomputes; the ABI's
// convention), or its raw log-prob with `raw_logprobs` and for greedy rows.
// As on the host: whole-distribution draws invert the CDF in id order over
// exp((raw - max) / T); cut draws order ids by log-prob (ties by id), keep
// the top k, then the smallest head whose probability reaches top_p, and
// invert the CDF of that head renormalised.
Drawn draw_rows(const torch::Tensor& raw, const std::vector<RowSampling>& rows, bool raw_logprobs);

// Whether a row's draw is cut (top-k or top-p): those take a sort of the row.
bool cuts(const RowSampling& s, int64_t vocab);

}  // namespace areal::local_inference
