// The decoder over a prefix tree's packed tokens (issue #36): each segment's
// queries attend to the keys of its path, so a prefix shared by many rows
// is computed once and its keys serve every row below it.
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "attention_layout.hpp"
#include "core/plugin_host/error.hpp"
#include "decoder_model.hpp"
#include "device.hpp"

namespace areal::torch_model {

c10::intrusive_ptr<AttentionLayout> DecoderModel::tree_layout(const Tree& t) const {
  const size_t S = t.begin.size();
  if (t.ids.dim() != 1 || t.positions.dim() != 1 || t.ids.size(0) != t.positions.size(0) || t.end.size() != S || t.parent.size() != S)
    throw Error(AREAL_CODE_INVALID_ARGUMENT, "tree: ids and positions must be [N], and begin, end and parent one entry a segment");
  const int64_t N = t.ids.size(0);
  // Each segment's path (the packed tokens it attends to, root first) and
  // where its own tokens start in it.
  std::vector<std::vector<int64_t>> path(S);
  std::vector<int64_t> own_offset(S);
  for (size_t s = 0, next = 0; s < S; ++s) {
    const int64_t up = t.parent[s];
    if (t.begin[s] != static_cast<int64_t>(next) || t.end[s] <= t.begin[s] || up >= static_cast<int64_t>(s) || up < -1)
      throw Error(AREAL_CODE_INVALID_ARGUMENT, "tree: segments must tile the tokens in order, each non-empty, parents first");
    if (up >= 0) path[s] = path[static_cast<size_t>(up)];
    own_offset[s] = static_cast<int64_t>(path[s].size());
    for (int64_t k = t.begin[s]; k < t.end[s]; ++k) path[s].push_back(k);
    next = static_cast<size_t>(t.end[s]);
  }
  if (S > 0 ? t.end[S - 1] != N : N != 0) throw Error(AREAL_CODE_INVALID_ARGUMENT, "tree: segments must cover every token");

  auto layout = c10::make_intrusive<AttentionLayout>();
  if (invariant_) {  // a path a segment: its ancestors' rows, then its own
    std::vector<invariant::Unit> units;
    for (size_t s = 0; s < S; ++s) invariant::add_units(units, invariant::shape(device_), static_cast<int64_t>(s), t.begin[s], t.end[s] - t.begin[s], own_offset[s]);
    layout->invariant = invariant::plan_attention(N, std::move(units), device_);
    if (S > 0) layout->invariant_keys = invariant::path_table(path, device_);
    return layout;
  }
  const auto idx = torch::TensorOptions().dtype(torch::kInt64);
  std::vector<int64_t> row_of(static_cast<size_t>(N));
  int64_t rows = 0;
  auto length = [&](size_t s) { return t.end[s] - t.begin[s]; };
  // Long segments (a prompt, a long reply) dominate their own attention:
  // a call each, no padding. Short ones (the quickstart's answers, most
  // turns) go in groups of similar path length, each padded to its largest
  // segment and path and attended at once, so a batch of hundreds of short
  // segments is a few kernels, not hundreds.
  constexpr int64_t kAlone = 256;
  constexpr int64_t kMaxScores = int64_t{1} << 25;
  std::vector<size_t> shorts;
  for (size_t s = 0; s < S; ++s) {
    // A short segment on a path so long that its own scores pass the bound
    // goes alone too: attend_heads splits its queries into blocks.
    const bool bounded = config_.num_attention_heads * length(s) * static_cast<int64_t>(path[s].size()) <= kMaxScores;
    if (length(s) <= kAlone && bounded) {
      shorts.push_back(s);
      continue;
    }
    AttentionLayout::Alone a;
    a.begin = t.begin[s], a.length = length(s), a.offset = own_offset[s];
    if (t.parent[s] >= 0) a.keys = upload(torch::tensor(path[s], idx), device_);
    for (int64_t r = 0; r < a.length; ++r) row_of[static_cast<size_t>(a.begin + r)] = rows + r;
    rows += a.length;
    layout->alone.push_back(std::move(a));
  }
  std::stable_sort(shorts.begin(), shorts.end(), [&](size_t a, size_t b) { return path[a].size() > path[b].size(); });
  const int64_t window = config_.sliding_window;
  const bool windows = config_.has_sliding_layers();
  for (size_t i = 0; i < shorts.size();) {
    // Grow the group while its padded scores cost at most twice the
    // segments' own and stay bounded.
    const int64_t Lk = static_cast<int64_t>(path[shorts[i]].size());
    int64_t Lq = length(shorts[i]);
    double own = static_cast<double>(Lq) * Lk;
    size_t j = i + 1;
    for (; j < shorts.size(); ++j) {
      const int64_t lq = std::max(Lq, length(shorts[j]));
      const double next = own + static_cast<double>(length(shorts[j])) * static_cast<double>(path[shorts[j]].size());
      const auto G = static_cast<double>(j - i + 1);
      if (G * lq * Lk > 2 * next + 64.0 * Lk || G * config_.num_attention_heads * lq * Lk > kMaxScores) break;
      own = next, Lq = lq;
    }
    const int64_t G = static_cast<int64_t>(j - i);
    AttentionLayout::Bucket b;
    b.groups = G, b.queries = Lq, b.keys = Lk;
    // Padded queries repeat the segment's last token and padded keys the
    // path's last: the causal mask keeps padded keys from every real query,
    // and padded queries' outputs are dropped.
    std::vector<int64_t> qr(static_cast<size_t>(G * Lq)), kr(static_cast<size_t>(G * Lk)), depth(static_cast<size_t>(G * Lq));
    for (int64_t g = 0; g < G; ++g) {
      const size_t s = shorts[i + static_cast<size_t>(g)];
      const int64_t n = length(s), P = static_cast<int64_t>(path[s].size());
      for (int64_t r = 0; r < Lq; ++r) {
        const int64_t at = std::min(r, n - 1);
        qr[static_cast<size_t>(g * Lq + r)] = t.begin[s] + at;
        depth[static_cast<size_t>(g * Lq + r)] = own_offset[s] + at;
      }
      for (int64_t r = 0; r < Lk; ++r) kr[static_cast<size_t>(g * Lk + r)] = path[s][static_cast<size_t>(std::min(r, P - 1))];
      for (int64_t r = 0; r < n; ++r) row_of[static_cast<size_t>(t.begin[s] + r)] = rows + g * Lq + r;
    }
    b.query_rows = upload(torch::tensor(qr, idx), device_);
    b.key_rows = upload(torch::tensor(kr, idx), device_);
    const torch::Tensor query_depth = torch::tensor(depth, idx).view({G, Lq, 1}), key_depth = torch::arange(Lk, idx).view({1, 1, Lk});
    b.allowed = upload(key_depth <= query_depth, device_);
    if (windows) b.allowed_window = upload((key_depth <= query_depth) & (key_depth > query_depth - window), device_);
    rows += G * Lq;
    layout->buckets.push_back(std::move(b));
    i = j;
  }
  layout->row_of = upload(torch::tensor(row_of, idx), device_);
  return layout;
}

torch::Tensor DecoderModel::attend_tree(int64_t layer, const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                        const AttentionLayout& layout) const {
  std::vector<torch::Tensor> pieces;  // pre-projection outputs, in the layout's row order
  for (const auto& a : layout.alone) {
    const torch::Tensor qs = q.narrow(0, a.begin, a.length);
    if (!a.keys.defined()) pieces.push_back(attend_heads(layer, qs, k.narrow(0, a.begin, a.length), v.narrow(0, a.begin, a.length), 0));
    else pieces.push_back(attend_heads(layer, qs, k.index_select(0, a.keys), v.index_select(0, a.keys), a.offset));
  }
  const bool window = config_.attention_window(layer) > 0;
  for (const auto& b : layout.buckets) {
    auto gather = [](const torch::Tensor& x, const torch::Tensor& rows, int64_t G, int64_t L) {
      return x.index_select(0, rows).view({G, L, x.size(1), x.size(2)});
    };
    const torch::Tensor out = attend_masked(layer, gather(q, b.query_rows, b.groups, b.queries), gather(k, b.key_rows, b.groups, b.keys),
                                            gather(v, b.key_rows, b.groups, b.keys), window ? b.allowed_window : b.allowed);
    pieces.push_back(out.reshape({b.groups * b.queries, -1}));
  }
  const torch::Tensor heads = pieces.size() == 1 ? pieces[0] : torch::cat(pieces, 0);
  return o_proj(layer, heads.index_select(0, layout.row_of));
}

torch::Tensor DecoderModel::hidden_tree(const Tree& t, bool checkpoint, MoeRouting* routing) const {
  const c10::intrusive_ptr<AttentionLayout> layout = tree_layout(t);
  const torch::Tensor ids = t.ids.to(torch::kInt64);
  if (ids.numel() && (ids.min().item<int64_t>() < 0 || ids.max().item<int64_t>() >= config_.vocab_size))
    throw Error(AREAL_CODE_INVALID_ARGUMENT, "tree: a token id is outside the vocabulary of " + std::to_string(config_.vocab_size));
  const torch::Tensor rope = rope_table(t.positions);  // once for every layer
  return run_layers(torch::embedding(p("model.embed_tokens.weight"), upload(ids, device_)), rope, layout, checkpoint, routing);
}

}  // namespace areal::torch_model
