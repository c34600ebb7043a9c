// Batch-invariant computation (issue #33's bitwise mode): every token's
// numbers independent of what else shares its forward pass, so that the
// engine's log-probs (a prefill pack, one decode step, rows copied from the
// prefix cache) and the trainer's recomputation (packed rows, other
// micro-batches, prefix trees) are equal bit for bit.
//
// Two rules make it so, on any device and with libtorch's own kernels:
// - Row-wise work (projections, norms, the head, log-softmax) runs on chunks
//   of exactly `rows` rows. One shape means one kernel and one reduction
//   order, and within a kernel a row's result depends on that row's values only.
// - Attention runs in units of at most `query_rows` queries of one sequence,
//   `units_per_call` units a call (one shape again), over blocks of
//   `key_block` keys taken at their sequence positions, with an online softmax
//   in float32. A query meets its sequence's key blocks in the same order
//   whatever the batch, and a block past its position changes nothing, bit
//   for bit: every score there is -inf, so the running maximum stays, the
//   rescale factor is exp(0) = 1 and the sums gain exact zeros.
// The price is padding (a decode step's rows fill a kRows chunk) and more,
// smaller kernels; bench/gpu measures it.
#pragma once

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include <ATen/core/ivalue.h>
#include <torch/types.h>

namespace areal::torch_model::invariant {

// The fixed shapes, by kind of device (an engine and a trainer that compare
// run on the same kind): a GPU takes large tiles at little cost; a CPU pays
// for every padded row, so its shapes are smaller.
struct Shape {
  int64_t rows, query_rows, key_block, units_per_call;
};
const Shape& shape(torch::Device device);

// f over x's rows (dimension 0) in chunks of exactly shape().rows, the last
// padded with zero rows; the results concatenated and cut back to x's row count.
torch::Tensor by_rows(const torch::Tensor& x, const std::function<torch::Tensor(const torch::Tensor&)>& f);
// x with zero rows appended up to a multiple of shape().rows, contiguous.
torch::Tensor padded_rows(const torch::Tensor& x);

// Up to shape().query_rows query rows of one sequence ("path"), at their positions in it.
struct Unit {
  int64_t path = 0;
  std::vector<int64_t> rows, positions;
};
// Appends the units of rows [first_row, first_row + count), consecutive
// tokens of `path` starting at position first_position.
void add_units(std::vector<Unit>& units, const Shape& shape, int64_t path, int64_t first_row, int64_t count, int64_t first_position);

// Which queries attend together and how far, made on the host once a
// forward and read by every layer.
struct AttentionPlan : torch::CustomClassHolder {
  struct Call {
    int64_t units = 0;          // real units; the rest of units_per_call repeat the first
    int64_t blocks = 0;         // key blocks: its furthest query's position / key_block, rounded up
    torch::Tensor paths;        // [units_per_call] int64: each unit's sequence, for the key source
    torch::Tensor query_rows;   // [units_per_call * query_rows] int64 rows of q; `rows` (one past the last) pads
    torch::Tensor positions;    // [units_per_call, query_rows] int64 query positions (0 for padding)
  };
  Shape shape{};
  int64_t rows = 0;             // query rows
  std::vector<Call> calls;
  torch::Tensor output_rows;    // [rows]: each query row's row in the calls' outputs, concatenated
};
c10::intrusive_ptr<AttentionPlan> plan_attention(int64_t rows, std::vector<Unit> units, torch::Device device);

// Keys and values of key block `block` (positions [block * key_block, +key_block))
// of each unit's path ([units_per_call] int64): [units_per_call, key_block,
// kv_heads, head_dim] each. Positions past a path's end may hold anything
// finite (they are masked).
using KeyBlocks = std::function<std::pair<torch::Tensor, torch::Tensor>(const torch::Tensor& paths, int64_t block)>;

// Causal attention of q [rows, heads, head_dim] per the plan: [rows, heads *
// head_dim] in q's dtype. Grouped-query heads: head h reads KV head h / (heads / kv_heads).
torch::Tensor attend(const torch::Tensor& q, const AttentionPlan& plan, const KeyBlocks& keys, int64_t kv_heads, double scale);

// Whether a matrix product on this device and dtype computes a row the same
// wherever the row sits among the product's rows, at the fixed shapes above
// (tried once per process, on small products). The rules above take it for
// granted; OpenBLAS's FMA kernels (its Haswell, Zen and newer cores) break
// it on CPU: their rows take different instruction paths by position.
bool row_invariant_products(torch::Device device, torch::ScalarType dtype);

// Key addresses by path for a KeyBlocks over packed rows: table[path][p] is
// the row of key p (clamped to the path's last key). Returns [paths,
// longest] int64 on `device`.
torch::Tensor path_table(const std::vector<std::vector<int64_t>>& paths, torch::Device device);
// The rows of key block `block` of each path: table[paths, block positions], [units_per_call * key_block].
torch::Tensor block_rows(const torch::Tensor& table, const torch::Tensor& paths, int64_t block, int64_t key_block);

}  // namespace areal::torch_model::invariant
