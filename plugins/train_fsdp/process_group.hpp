// The data-parallel group of the fsdp engine, over c10d: NCCL when the
// ranks compute on CUDA and this libtorch has it, Gloo otherwise (Gloo
// works on host copies of CUDA tensors: slower, but any libtorch can run).
// Debian's libtorch 1.13 Gloo has no reduce_scatter and no flat all-gather,
// so for Gloo both are built here from `reduce` (one per owner) and list
// all-gather; NCCL uses its flat collectives.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <torch/autograd.h>
#include <torch/types.h>

namespace areal::fsdp {

class ProcessGroup {
 public:
  // world_size 1 needs no store and makes every collective a no-op.
  // init_method: "file:///path" (a FileStore every rank can reach) or
  // "tcp://host:port" (a TCPStore served by rank 0). backend: "auto" (nccl
  // for a CUDA device when built with it, else gloo), "nccl" or "gloo".
  ProcessGroup(int rank, int world_size, const std::string& init_method, int timeout_seconds, const torch::Device& device,
               const std::string& backend = "auto");
  ~ProcessGroup();

  int rank() const { return rank_; }
  int world_size() const { return world_; }
  const std::string& backend() const { return backend_; }

  // Sums `t` over ranks, in place on every rank (any device).
  void all_reduce_sum(torch::Tensor& t);
  // `full` (length world * shard.numel()) receives every rank's shard in rank order.
  void all_gather(const torch::Tensor& shard, torch::Tensor& full);
  // Sums `full` over ranks and returns this rank's slice of the sum (with
  // one rank, `full` itself).
  torch::Tensor reduce_scatter_sum(const torch::Tensor& full);
  void barrier();

  // Whether this build can form NCCL groups (libtorch with CUDA and NCCL)
  // and Gloo groups (Gloo's headers were found at build time).
  static bool nccl_built();
  static bool gloo_built();

 private:
  struct Impl;
  int rank_ = 0, world_ = 1;
  std::string backend_ = "none";
  torch::Device device_ = torch::kCPU;
  std::unique_ptr<Impl> impl_;
};

}  // namespace areal::fsdp
