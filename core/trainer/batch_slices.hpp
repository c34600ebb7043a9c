// Cutting a packed batch into contiguous runs of whole sequences, balanced
// by token count and cut where neighbouring rows share the least prefix:
// the data-parallel split over train ranks and the PPO minibatches of one
// step both use it, so a GRPO group or a session stays in one part and its
// prefix tree is computed once (train.prefix_sharing).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "areal/tensors.h"

namespace areal::trainer {

struct BatchSlice {
  int64_t first_sequence = 0, end_sequence = 0;  // [first, end)
  int64_t first_token = 0, end_token = 0;
};

// `parts` slices of the sequences delimited by cu_seqlens (B + 1 offsets).
// `shared` (optional, B entries): the tokens each sequence shares with the
// one before it; a cut moves, within a quarter of a part's share of the
// tokens, to where the least is shared. `parts_name` says what the parts
// are in the error thrown (areal::Error INVALID_ARGUMENT) when there are
// fewer sequences than parts x min_rows; every part gets min_rows at least.
std::vector<BatchSlice> plan_slices(const std::vector<int64_t>& cu_seqlens, int parts, const std::vector<int64_t>& shared = {},
                                    const std::string& parts_name = "parts", int64_t min_rows = 1);

// For each sequence of the batch, the length of the prefix it shares with
// the previous one (0 for the first), from its input_ids; empty when the
// batch has no host input_ids.
std::vector<int64_t> shared_prefixes(const areal_tensor_map& batch);

// cu_seqlens of a batch, as int64.
std::vector<int64_t> cu_seqlens_of(const areal_tensor_map& batch);

}  // namespace areal::trainer
