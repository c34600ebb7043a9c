// Scattering a packed batch over data-parallel train ranks: each rank gets
// a contiguous run of whole sequences, runs balanced by token count, cut
// where neighbouring rows share the least prefix, so a GRPO group or a
// session stays on one rank whole and its prefix tree is computed once
// (train.prefix_sharing) rather than on two ranks.
// Per-token tensors ([T]) and per-sequence tensors ([B]) are sliced,
// "cu_seqlens" is rebased to start at 0, 0-d scalars go to every rank.
// Because the fsdp engine weights each micro-batch by its share of the
// *global* batch's loss tokens, the ranks' gradients sum to the one-rank
// gradient whatever the split.
#pragma once

#include <cstdint>
#include <vector>

#include "areal/tensors.h"
#include "rank_messages.hpp"

namespace areal::host::ranks {

struct BatchSlice {
  int64_t first_sequence = 0, end_sequence = 0;  // [first, end)
  int64_t first_token = 0, end_token = 0;
};

// `parts` slices of the sequences delimited by cu_seqlens (B + 1 offsets).
// `shared` (optional, B entries): the tokens each sequence shares with the
// one before it; a cut moves, within a quarter of a rank's share of the
// tokens, to where the least is shared.
// Throws areal::Error(INVALID_ARGUMENT) when there are fewer sequences than parts.
std::vector<BatchSlice> plan_slices(const std::vector<int64_t>& cu_seqlens, int parts, const std::vector<int64_t>& shared = {});

// For each sequence of the batch, the length of the prefix it shares with
// the previous one (0 for the first), from its input_ids.
std::vector<int64_t> shared_prefixes(const areal_tensor_map& batch);

// The batch's tensors for each slice, in the batch's order.
std::vector<std::vector<OwnedTensor>> split_batch(const areal_tensor_map& batch, const std::vector<BatchSlice>& slices);

// cu_seqlens of a batch, as int64.
std::vector<int64_t> cu_seqlens_of(const areal_tensor_map& batch);

}  // namespace areal::host::ranks
