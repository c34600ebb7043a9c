// train.prefix_sharing (issue #36): the rows of a micro-batch that share
// token prefixes (a GRPO group's prompt, the turns of one session, retries
// and sub-agent branches) computed as one prefix tree, each shared token
// once. The tree's log-probs are gathered back to the rows, so the
// algorithm's loss sees the per-row layout unchanged and the gather's
// backward sums each shared token's gradient over the rows through it:
// the same loss and gradient as computing every row on its own.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <torch/types.h>

#include "core/trainer/prefix_tree.hpp"
#include "decoder_model.hpp"

namespace areal::fsdp {

enum class PrefixSharing { kAuto, kOff };
PrefixSharing parse_prefix_sharing(const std::string& value);  // "auto" | "off"

// Consecutive rows [first, end) forming one micro-batch, and how it is computed.
struct MicroBatch {
  int64_t first = 0, end = 0;
  int64_t row_tokens = 0;       // the rows' tokens
  int64_t computed_tokens = 0;  // the tokens its forward computes: the tree's, or row_tokens
  bool tree = false;
};

// Micro-batches in row order, each as many rows as keep its computed
// tokens within `budget` (at least one row). With sharing a micro-batch is
// a tree when that saves at least a tenth of its tokens (below that the
// per-row path's fused kernels win) and per row otherwise, both within the
// budget. ids: the batch's tokens, bounds: its B+1 row offsets.
std::vector<MicroBatch> plan_micro_batches(const std::vector<int32_t>& ids, const std::vector<int64_t>& bounds, int64_t budget, PrefixSharing sharing);

// A PrefixTree's layout as the decoder takes it.
torch_model::DecoderModel::Tree model_tree(const trainer::PrefixTree& t);

// Per-row log-probs of rows [first, end) (as DecoderModel::logprobs gives
// them: 0 at each row's start), computed as a tree when `tree`. `routing`
// stays per row token: replayed experts are read by row (a shared token
// takes its first row's), and chosen experts and router logits come back
// by row, so the load-balancing loss is the per-row one too.
torch::Tensor rows_logprobs(const torch_model::DecoderModel& model, const std::vector<int32_t>& ids, const std::vector<int64_t>& bounds,
                            const MicroBatch& mb, float temperature, bool checkpoint, torch_model::MoeRouting* routing);

}  // namespace areal::fsdp
