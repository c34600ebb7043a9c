// Which keys each query of one forward attends to: causal attention within
// each sequence of a packed batch, or along the paths of a prefix tree
// (issue #36). Built once per forward on the host and read by every layer,
// and by a checkpointed layer's recompute in backward, which keeps it alive
// by reference count after the forward has returned.
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/core/ivalue.h>
#include <torch/types.h>

#include "batch_invariant.hpp"

namespace areal::torch_model {

struct AttentionLayout : torch::CustomClassHolder {
  // Packed sequences: their B+1 offsets. Empty for a tree.
  std::vector<int64_t> bounds;
  // The same offsets as int32 on the device, for varlen flash attention
  // (DecoderModel::varlen_offsets); undefined where that kernel is not used.
  torch::Tensor offsets;

  // A tree. A long segment attends with a call of its own: its queries are
  // packed tokens [begin, begin + length), its keys the path `keys`
  // (undefined for a root segment, whose path is its own tokens), the
  // first query at depth `offset` of that path.
  struct Alone {
    int64_t begin = 0, length = 0, offset = 0;
    torch::Tensor keys;  // [path] int64, on the model's device
  };
  // Short segments of similar size attend together, padded: segment g's
  // queries are query_rows[g], its keys key_rows[g], and `allowed` says
  // which key each query sees (causal along the path; `allowed_window`
  // also within a sliding layer's window).
  struct Bucket {
    int64_t groups = 0, queries = 0, keys = 0;
    torch::Tensor query_rows, key_rows;       // [groups * queries], [groups * keys] int64
    torch::Tensor allowed, allowed_window;    // [groups, queries, keys] bool
  };
  std::vector<Alone> alone;
  std::vector<Bucket> buckets;
  torch::Tensor row_of;  // packed token -> its row in the outputs of alone then buckets, padding included
  bool tree() const { return bounds.empty(); }

  // Batch-invariant mode: the attention plan (a path a sequence or a tree
  // segment) and each path's key rows (invariant::path_table). Set instead
  // of the above.
  c10::intrusive_ptr<invariant::AttentionPlan> invariant;
  torch::Tensor invariant_keys;
};

}  // namespace areal::torch_model
