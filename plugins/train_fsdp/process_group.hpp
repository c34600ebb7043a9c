// The data-parallel group of the fsdp engine: c10d over Gloo on CPU.
// Debian's libtorch 1.13 Gloo has no reduce_scatter and no flat all-gather,
// so both are built here from `reduce` (one per owner) and list all-gather.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <torch/torch.h>

namespace areal::fsdp {

class ProcessGroup {
 public:
  // world_size 1 needs no store and makes every collective a no-op.
  // init_method: "file:///path" (a FileStore every rank can reach) or
  // "tcp://host:port" (a TCPStore served by rank 0).
  ProcessGroup(int rank, int world_size, const std::string& init_method, int timeout_seconds);
  ~ProcessGroup();

  int rank() const { return rank_; }
  int world_size() const { return world_; }

  // Sums `t` over ranks, in place on every rank.
  void all_reduce_sum(torch::Tensor& t);
  // `full` (length world * shard.numel()) receives every rank's shard in rank order.
  void all_gather(const torch::Tensor& shard, torch::Tensor& full);
  // Sums `full` over ranks and returns this rank's slice of the sum (with
  // one rank, `full` itself).
  torch::Tensor reduce_scatter_sum(const torch::Tensor& full);
  void barrier();

 private:
  struct Impl;
  int rank_ = 0, world_ = 1;
  std::unique_ptr<Impl> impl_;
};

}  // namespace areal::fsdp
