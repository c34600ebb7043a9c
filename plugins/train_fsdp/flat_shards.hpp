// Parameters sharded across the data-parallel group, FSDP style: every
// parameter lives in one flat buffer (padded to a multiple of the world
// size) of which each rank owns a contiguous slice. The full parameters are
// gathered for a forward/backward and released afterwards; gradients are
// reduced to the slice's owner.
//
// Mixed precision as FSDP's MixedPrecision does it: the slice each rank owns
// is the float32 master copy (the optimizer updates it, its AdamW moments
// are float32 too); the model's parameters hold the compute dtype
// (bfloat16/float16), cast from the master when gathered; gradients are
// reduced in float32. With a float32/float64 model master and parameters
// are one dtype (and with one rank, one buffer).
#pragma once

#include <cstdint>
#include <vector>

#include <torch/autograd.h>
#include <torch/types.h>

#include "process_group.hpp"

namespace areal::fsdp {

class FlatShards {
 public:
  // `params`: the model's leaf parameters in a fixed order (the same on every
  // rank), all of one dtype and device. Their current values are the
  // initial weights; with world_size > 1 they are released at once (call
  // gather() before using the model).
  FlatShards(std::vector<torch::Tensor> params, ProcessGroup& group);

  // Makes every parameter a full-size view of a freshly gathered flat buffer.
  void gather();
  // Frees the gathered buffer (world_size > 1); parameters become empty.
  void release();
  // Adds the parameters' gradients (one micro-batch's) into a flat buffer in
  // the master dtype and clears them, so micro-batches sum in float32 under
  // mixed precision rather than in the compute dtype.
  void accumulate_gradients();
  // Sums every rank's accumulated gradients and returns this rank's slice of
  // the sum, in the master dtype; clears the accumulator and the parameters' gradients.
  torch::Tensor reduce_gradients();
  // Drops every gradient held: the accumulator's sums and the parameters'
  // own. A step whose micro-batch threw part-way leaves both behind.
  void discard_gradients();
  // After the optimizer changed the master slice: the compute copy follows
  // (one rank; with more, the next gather() casts).
  void master_updated();
  // Copies full values (e.g. loaded from a checkpoint) into this rank's slice.
  void load_full(const std::vector<torch::Tensor>& values);
  // The full master weights, one tensor per parameter (collective when
  // world_size > 1: every rank gathers), for saving at full precision.
  std::vector<torch::Tensor> gather_master();

  torch::Tensor& shard() { return shard_; }  // this rank's master weights
  int64_t total_numel() const { return total_; }
  bool mixed_precision() const { return mixed_; }

 private:
  std::vector<torch::Tensor> params_;
  std::vector<int64_t> offsets_, numels_;
  std::vector<std::vector<int64_t>> shapes_;  // kept: released parameters are empty
  ProcessGroup& group_;
  int64_t total_ = 0, padded_ = 0;
  bool mixed_ = false;
  torch::TensorOptions compute_;  // the parameters' dtype and device
  torch::Tensor shard_, full_;
  torch::Tensor grad_sum_;  // accumulate_gradients()'s buffer, [padded_] in the master dtype
};

}  // namespace areal::fsdp
