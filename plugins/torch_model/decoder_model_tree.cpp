// The decoder over a prefix tree's packed tokens (issue #36): each segment's
// queries attend to the keys of its path, so a prefix shared by many rows
// is computed once and its keys serve every row below it.
#include <cstdint>
#include <string>
#include <vector>

#include "core/plugin_host/error.hpp"
#include "decoder_model.hpp"

namespace areal::torch_model {

torch::Tensor DecoderModel::hidden_tree(const Tree& t) const {
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
  const auto idx = torch::TensorOptions().dtype(torch::kInt64);
  std::vector<torch::Tensor> path_index;
  for (const auto& tokens : path) path_index.push_back(torch::tensor(tokens, idx).to(device_));
  const torch::Tensor rope = rope_table(t.positions.to(device_, torch::kInt64));
  torch::Tensor x = torch::embedding(p("model.embed_tokens.weight"), t.ids.to(device_, torch::kInt64));
  for (int64_t l = 0; l < config_.num_hidden_layers; ++l) {
    const std::string pre = "model.layers." + std::to_string(l) + ".";
    torch::Tensor q, k, v;
    qkv(l, rms_norm(x, p(pre + "input_layernorm.weight")), rope, q, k, v);
    std::vector<torch::Tensor> heads;
    for (size_t s = 0; s < S; ++s)
      heads.push_back(attend_heads(l, q.narrow(0, t.begin[s], t.end[s] - t.begin[s]), k.index_select(0, path_index[s]),
                                   v.index_select(0, path_index[s]), own_offset[s]));
    const torch::Tensor x2 = x + o_proj(l, torch::cat(heads, 0));
    x = x2 + mlp(l, rms_norm(x2, p(pre + "post_attention_layernorm.weight")), nullptr);
  }
  return rms_norm(x, p("model.norm.weight"));
}

}  // namespace areal::torch_model
