// The decoder over a PrefixTree (issue #36) against every row computed on
// its own (the per-row packed forward): the same log-probs for each row
// token and, for a loss over the rows (plus, for MoE models, the
// load-balancing loss over the rows' router logits), the same gradient for
// every weight. For group sharing, multi-turn chains, branching sessions,
// long segments (the attention's call-per-segment path) and a mix; for a
// dense model, Qwen3-MoE and GPT-OSS (sinks, a window the paths cross);
// in float64 and float32, with and without gradient checkpointing.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/hf/model_files/init_model.hpp"
#include "core/trainer/prefix_tree.hpp"
#include "decoder_model.hpp"
#include "prefix_sharing.hpp"
#include "model_dir_once.hpp"
#include "token_rows.hpp"

using areal::torch_model::DecoderModel;
using areal::torch_model::MoeRouting;
using areal::trainer::PrefixTree;
using areal::testing::Rows;
using areal::testing::operator+;
constexpr auto run = areal::testing::token_run;

namespace {

// A GRPO group: answers of several lengths to one prompt.
Rows group() {
  const auto prompt = run(3, 20);
  return {prompt + run(100, 4), prompt + run(120, 9), prompt + run(140, 3), prompt + run(160, 7), prompt + run(180, 1)};
}
// A session exported a row per call: each turn resends the conversation.
Rows chain() {
  Rows out;
  std::vector<int32_t> so_far = run(7, 12);
  for (int turn = 0; turn < 5; ++turn) out.push_back(so_far = so_far + run(50 + 20 * turn, 3 + turn));
  return out;
}
// A session whose second turn was retried twice, one retry with a sub-agent
// branching off it.
Rows branching() {
  const auto start = run(9, 10) + run(60, 5);
  return {start + run(80, 6), start + run(90, 4), start + run(90, 4) + run(200, 7), start + run(90, 4) + run(210, 3), start + run(95, 8) + run(5, 2)};
}
// Segments longer than the attention's padded groups take (a call each).
Rows long_segments() {
  const auto prompt = run(11, 300);
  return {prompt + run(20, 270), prompt + run(21, 5), prompt + run(21, 5) + run(40, 280), run(13, 290)};
}
// All of it in one batch, with an unrelated row.
Rows mix() {
  Rows out;
  for (const Rows& r : {group(), chain(), branching(), long_segments(), Rows{run(11, 15)}}) out.insert(out.end(), r.begin(), r.end());
  return out;
}

struct Compared {
  double logprob_diff = 0, grad_diff = 0, grad_scale = 0, aux_diff = 0;
  int64_t tree_tokens = 0, row_tokens = 0;
};

Compared compare(const std::string& family, const Rows& rs, torch::Dtype dtype, bool checkpoint) {
  areal::model::InitModelOptions o;
  o.family = family, o.preset = "tiny", o.tokenizer_dir = "bytes", o.seed = 41;
  o.initializer_range = 0.2;
  const std::string dir = areal::testing::model_dir_once("tree-" + family, o);
  const PrefixTree tree = PrefixTree::build(rs);
  const auto i64 = torch::kInt64;
  const DecoderModel::Tree t = areal::fsdp::model_tree(tree);
  const torch::Tensor row_index = torch::tensor(tree.row_index, i64);
  // Per-row reference: the rows packed back to back.
  std::vector<int64_t> ids, cu = {0};
  for (const auto& r : rs) ids.insert(ids.end(), r.begin(), r.end()), cu.push_back(static_cast<int64_t>(ids.size()));
  torch::manual_seed(9);
  const torch::Tensor weights = torch::randn({static_cast<int64_t>(ids.size())}, torch::kFloat64);
  Compared c;
  c.tree_tokens = tree.tokens(), c.row_tokens = tree.row_tokens();
  std::vector<torch::Tensor> grads[2];
  torch::Tensor lps[2], aux[2];
  for (int way = 0; way < 2; ++way) {
    DecoderModel m = DecoderModel::load(dir, dtype);
    MoeRouting routing;
    routing.keep_logits = true;
    lps[way] = way == 0 ? m.logprobs(torch::tensor(ids, i64), torch::tensor(cu, i64), 1.0f, checkpoint, &routing)
                        : m.logprobs_tree(t, torch::tensor(tree.previous, i64), 1.0f, checkpoint, &routing).index_select(0, row_index);
    torch::Tensor loss = (lps[way] * weights.to(lps[way].scalar_type())).sum();
    if (!routing.logits.empty()) {
      // The balancing loss is over the rows' tokens: a tree's router logits gathered by row.
      if (way == 1)
        for (auto& l : routing.logits) l = l.index_select(0, row_index);
      const auto& mc = m.config();
      aux[way] = areal::torch_model::load_balancing_loss(routing.logits, mc.num_experts, mc.num_experts_per_tok);
      loss = loss + aux[way] * 10.0;
    }
    loss.backward();
    for (const auto& p : m.parameters()) grads[way].push_back(p.grad().defined() ? p.grad().to(torch::kFloat64) : torch::zeros_like(p, torch::kFloat64));
  }
  c.logprob_diff = (lps[0] - lps[1]).abs().max().item<double>();
  if (aux[0].defined()) c.aux_diff = (aux[0] - aux[1]).abs().item<double>();
  for (size_t i = 0; i < grads[0].size(); ++i) {
    c.grad_diff = std::max(c.grad_diff, (grads[0][i] - grads[1][i]).abs().max().item<double>());
    c.grad_scale = std::max(c.grad_scale, grads[0][i].abs().max().item<double>());
  }
  return c;
}

struct Case {
  std::string family, rows;
  bool float64, checkpoint;
};

Rows rows_named(const std::string& name) {
  if (name == "group") return group();
  if (name == "chain") return chain();
  if (name == "branching") return branching();
  if (name == "long") return long_segments();
  return mix();
}

class TreeForward : public ::testing::TestWithParam<Case> {};

TEST_P(TreeForward, LogprobsAndGradientsEqualPerRowComputation) {
  const Case& k = GetParam();
  const Compared c = compare(k.family, rows_named(k.rows), k.float64 ? torch::kFloat64 : torch::kFloat32, k.checkpoint);
  EXPECT_LT(c.tree_tokens, c.row_tokens);
  // float32: the bound on log-probs; gradients relative to their largest entry.
  const double tol = k.float64 ? 1e-10 : 1e-5;
  EXPECT_LT(c.logprob_diff, tol);
  EXPECT_LT(c.grad_diff, tol * std::max(1.0, c.grad_scale));
  EXPECT_LT(c.aux_diff, tol);
  std::printf("%s %s %s%s: %lld tree tokens for %lld row tokens; max |log-prob diff| %.3g, max |grad diff| %.3g (largest grad %.3g), aux diff %.3g\n",
              k.family.c_str(), k.rows.c_str(), k.float64 ? "float64" : "float32", k.checkpoint ? " checkpointed" : "",
              static_cast<long long>(c.tree_tokens), static_cast<long long>(c.row_tokens), c.logprob_diff, c.grad_diff, c.grad_scale, c.aux_diff);
}

std::vector<Case> cases() {
  std::vector<Case> out;
  for (const char* rows : {"group", "chain", "branching", "long", "mix"}) out.push_back({"qwen3", rows, false, false});
  out.push_back({"qwen3", "mix", true, false});
  out.push_back({"qwen3", "mix", false, true});
  for (const char* family : {"qwen3_moe", "gpt_oss"}) {
    out.push_back({family, "mix", true, false});
    out.push_back({family, "mix", false, false});
    out.push_back({family, "mix", false, true});
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Cases, TreeForward, ::testing::ValuesIn(cases()), [](const auto& info) {
  const Case& c = info.param;
  return c.family + "_" + c.rows + (c.float64 ? "_float64" : "_float32") + (c.checkpoint ? "_checkpointed" : "");
});

// Leaving the ancestors out of the attention changes the log-probs: the
// comparison above would see a tree that drops them.
TEST(TreeForwardSensitivity, AncestorsAreAttendedTo) {
  areal::model::InitModelOptions o;
  o.family = "qwen3", o.preset = "tiny", o.tokenizer_dir = "bytes", o.seed = 41;
  o.initializer_range = 0.2;
  const DecoderModel m = DecoderModel::load(areal::testing::model_dir_once("tree-qwen3", o), torch::kFloat64);
  const PrefixTree tree = PrefixTree::build(group());
  const auto i64 = torch::kInt64;
  const DecoderModel::Tree t = areal::fsdp::model_tree(tree);
  DecoderModel::Tree cut = t;  // every segment a root: children lose the prompt
  cut.parent.assign(t.parent.size(), -1);
  torch::NoGradGuard no_grad;
  const torch::Tensor prev = torch::tensor(tree.previous, i64);
  const double moved = (m.logprobs_tree(t, prev, 1.0f) - m.logprobs_tree(cut, prev, 1.0f)).abs().max().item<double>();
  EXPECT_GT(moved, 1e-2);
}

}  // namespace
