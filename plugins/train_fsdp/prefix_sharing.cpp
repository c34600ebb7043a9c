#include "prefix_sharing.hpp"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "areal/sdk.hpp"
#include "device.hpp"

namespace areal::fsdp {

PrefixSharing parse_prefix_sharing(const std::string& value) {
  if (value == "auto") return PrefixSharing::kAuto;
  if (value == "off") return PrefixSharing::kOff;
  throw sdk::invalid_argument("fsdp: prefix_sharing must be auto or off, not '" + value + "'");
}

std::vector<MicroBatch> plan_micro_batches(const std::vector<int32_t>& ids, const std::vector<int64_t>& bounds, int64_t budget,
                                           PrefixSharing sharing) {
  const int64_t B = static_cast<int64_t>(bounds.size()) - 1;
  std::vector<MicroBatch> out;
  trainer::PrefixCounter tree;
  auto row_length = [&](int64_t b) { return bounds[b + 1] - bounds[b]; };
  for (int64_t b = 0; b < B;) {
    MicroBatch mb;
    mb.first = b;
    tree.clear();
    while (b < B) {
      const int64_t n = row_length(b);
      const int32_t* row = ids.data() + bounds[b];
      const int64_t grows = sharing == PrefixSharing::kOff ? n : tree.new_tokens(row, n);
      // The tree, or (should it stay per row) the rows, must fit.
      const int64_t computed = (sharing == PrefixSharing::kOff ? mb.row_tokens : tree.tokens()) + grows;
      if (b > mb.first && computed > budget) break;
      if (sharing != PrefixSharing::kOff) tree.add(row, n);
      mb.row_tokens += n;
      ++b;
    }
    mb.end = b;
    const int64_t shared = sharing == PrefixSharing::kOff ? mb.row_tokens : tree.tokens();
    // A per-row micro-batch past the budget (its tree fitted) stays a tree.
    mb.tree = sharing != PrefixSharing::kOff && mb.end - mb.first > 1 && mb.row_tokens > 0 &&
              (10 * shared <= 9 * mb.row_tokens || mb.row_tokens > budget);
    mb.computed_tokens = mb.tree ? shared : mb.row_tokens;
    out.push_back(mb);
  }
  return out;
}

torch_model::DecoderModel::Tree model_tree(const trainer::PrefixTree& t) {
  torch_model::DecoderModel::Tree tree;
  tree.ids = torch::tensor(std::vector<int64_t>(t.ids.begin(), t.ids.end()), torch::kInt64);
  tree.positions = torch::tensor(t.position, torch::kInt64);
  for (const auto& seg : t.segments) tree.begin.push_back(seg.begin), tree.end.push_back(seg.end), tree.parent.push_back(seg.parent);
  return tree;
}

torch::Tensor rows_logprobs(const torch_model::DecoderModel& model, const std::vector<int32_t>& ids, const std::vector<int64_t>& bounds,
                            const MicroBatch& mb, float temperature, bool checkpoint, torch_model::MoeRouting* routing) {
  const int64_t s = bounds[mb.first], len = bounds[mb.end] - s;
  const auto i64 = torch::kInt64;
  if (!mb.tree) {
    std::vector<int64_t> cu;
    for (int64_t b = mb.first; b <= mb.end; ++b) cu.push_back(bounds[b] - s);
    const torch::Tensor row_ids = torch::tensor(std::vector<int64_t>(ids.begin() + s, ids.begin() + s + len), i64);
    return model.logprobs(row_ids, torch::tensor(cu, i64), temperature, checkpoint, routing);
  }
  std::vector<std::vector<int32_t>> rows;
  for (int64_t b = mb.first; b < mb.end; ++b) rows.emplace_back(ids.begin() + bounds[b], ids.begin() + bounds[b + 1]);
  const trainer::PrefixTree t = trainer::PrefixTree::build(rows);
  const torch_model::DecoderModel::Tree tree = model_tree(t);
  const torch::Tensor row_index = torch_model::upload(torch::tensor(t.row_index, i64), model.device());  // not waiting for the last backward
  if (routing != nullptr && routing->replay.defined()) {
    // A shared token's experts: those recorded for the first row through it.
    std::vector<int64_t> first_row_token(static_cast<size_t>(t.tokens()), -1);
    for (int64_t r = static_cast<int64_t>(t.row_index.size()) - 1; r >= 0; --r) first_row_token[static_cast<size_t>(t.row_index[r])] = r;
    routing->replay = routing->replay.index_select(0, torch_model::upload(torch::tensor(first_row_token, i64), routing->replay.device()));
  }
  torch::Tensor lp = model.logprobs_tree(tree, torch::tensor(t.previous, i64), temperature, checkpoint, routing).index_select(0, row_index);
  if (routing != nullptr) {
    for (auto& c : routing->chosen) c = c.index_select(0, row_index.to(c.device()));
    for (auto& l : routing->logits) l = l.index_select(0, row_index.to(l.device()));
  }
  return lp;
}

}  // namespace areal::fsdp
