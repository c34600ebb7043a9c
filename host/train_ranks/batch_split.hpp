// Scattering a packed batch over data-parallel train ranks: each rank gets
// a contiguous run of whole sequences (core/trainer/batch_slices plans the
// runs), so a GRPO group or a session stays on one rank whole.
// Per-token tensors ([T]) and per-sequence tensors ([B]) are sliced,
// "cu_seqlens" is rebased to start at 0, 0-d scalars go to every rank.
// Because the fsdp engine weights each micro-batch by its share of the
// *global* batch's loss tokens, the ranks' gradients sum to the one-rank
// gradient whatever the split.
#pragma once

#include <cstdint>
#include <vector>

#include "areal/tensors.h"
#include "core/trainer/batch_slices.hpp"
#include "rank_messages.hpp"

namespace areal::host::ranks {

using trainer::BatchSlice;
using trainer::cu_seqlens_of;
using trainer::shared_prefixes;

// The batch's tensors for each slice, in the batch's order.
std::vector<std::vector<OwnedTensor>> split_batch(const areal_tensor_map& batch, const std::vector<BatchSlice>& slices);

}  // namespace areal::host::ranks
