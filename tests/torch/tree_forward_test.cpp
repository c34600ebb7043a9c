// The decoder over a PrefixTree (issue #36) against every row computed on
// its own (the per-row packed forward): the same log-probs for each row
// token and, for a loss over the rows, the same gradient for every weight,
// in float64; for a dense model and for GPT-OSS (sinks, a window the paths
// cross, experts).
#include <cstdint>
#include <string>
#include <vector>
#include <algorithm>
#include <cstdio>

#include <gtest/gtest.h>

#include "core/hf/model_files/init_model.hpp"
#include "core/trainer/prefix_tree.hpp"
#include "decoder_model.hpp"
#include "model_dir_once.hpp"

using areal::torch_model::DecoderModel;
using areal::trainer::PrefixTree;

namespace {

std::vector<int32_t> run(int32_t from, int n) {
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) out.push_back((from + 37 * i) % 300);
  return out;
}

std::vector<int32_t> operator+(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// A group of four answers to one 20-token prompt, a three-turn session, a
// retry branching off the session's second turn, and an unrelated row.
std::vector<std::vector<int32_t>> rows() {
  const auto prompt = run(3, 20), turn1 = run(50, 6), turn2 = run(90, 5);
  return {prompt + run(100, 4), prompt + run(120, 9), prompt + run(140, 3), prompt + run(160, 7),
          run(7, 12) + turn1, run(7, 12) + turn1 + turn2, run(7, 12) + turn1 + turn2 + run(200, 8),
          run(7, 12) + turn1 + run(230, 6), run(11, 15)};
}

struct Compared {
  double logprob_diff = 0, grad_diff = 0;
  int64_t tree_tokens = 0, row_tokens = 0;
};

Compared compare(const std::string& family) {
  areal::model::InitModelOptions o;
  o.family = family, o.preset = "tiny", o.tokenizer_dir = "bytes", o.seed = 41;
  o.initializer_range = 0.2;
  const std::string dir = areal::testing::model_dir_once("tree-" + family, o);
  const auto rs = rows();
  const PrefixTree tree = PrefixTree::build(rs);
  const auto i64 = torch::kInt64;
  DecoderModel::Tree t;
  t.ids = torch::tensor(std::vector<int64_t>(tree.ids.begin(), tree.ids.end()), i64);
  t.positions = torch::tensor(tree.position, i64);
  for (const auto& s : tree.segments) t.begin.push_back(s.begin), t.end.push_back(s.end), t.parent.push_back(s.parent);
  const torch::Tensor row_index = torch::tensor(tree.row_index, i64);
  // Per-row reference: the rows packed back to back.
  std::vector<int64_t> ids, cu = {0};
  for (const auto& r : rs) ids.insert(ids.end(), r.begin(), r.end()), cu.push_back(static_cast<int64_t>(ids.size()));
  torch::manual_seed(9);
  const torch::Tensor weights = torch::randn({static_cast<int64_t>(ids.size())}, torch::kFloat64);
  Compared c;
  c.tree_tokens = tree.tokens(), c.row_tokens = tree.row_tokens();
  std::vector<torch::Tensor> grads[2];
  torch::Tensor lps[2];
  for (int way = 0; way < 2; ++way) {
    DecoderModel m = DecoderModel::load(dir, torch::kFloat64);
    lps[way] = way == 0 ? m.logprobs(torch::tensor(ids, i64), torch::tensor(cu, i64), 1.0f)
                        : m.logprobs_tree(t, torch::tensor(tree.previous, i64), 1.0f).index_select(0, row_index);
    (lps[way] * weights).sum().backward();
    for (const auto& p : m.parameters()) grads[way].push_back(p.grad().defined() ? p.grad().clone() : torch::zeros_like(p));
  }
  c.logprob_diff = (lps[0] - lps[1]).abs().max().item<double>();
  for (size_t i = 0; i < grads[0].size(); ++i) c.grad_diff = std::max(c.grad_diff, (grads[0][i] - grads[1][i]).abs().max().item<double>());
  return c;
}

}  // namespace

TEST(TreeForward, Qwen3LogprobsAndGradientsEqualPerRowComputation) {
  const Compared c = compare("qwen3");
  EXPECT_LT(c.tree_tokens, c.row_tokens);
  EXPECT_LT(c.logprob_diff, 1e-10);
  EXPECT_LT(c.grad_diff, 1e-10);
  std::printf("qwen3: %lld tree tokens for %lld row tokens; max |log-prob diff| %.3g, max |grad diff| %.3g\n", static_cast<long long>(c.tree_tokens),
              static_cast<long long>(c.row_tokens), c.logprob_diff, c.grad_diff);
}

TEST(TreeForward, GptOssLogprobsAndGradientsEqualPerRowComputation) {
  const Compared c = compare("gpt_oss");
  EXPECT_LT(c.logprob_diff, 1e-10);
  EXPECT_LT(c.grad_diff, 1e-10);
  std::printf("gpt_oss: %lld tree tokens for %lld row tokens; max |log-prob diff| %.3g, max |grad diff| %.3g\n", static_cast<long long>(c.tree_tokens),
              static_cast<long long>(c.row_tokens), c.logprob_diff, c.grad_diff);
}
