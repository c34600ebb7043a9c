// Captured CUDA graphs of one computation (the local engine's decode step),
// one per static shape. A decode step of a small model is a few hundred
// kernels of a few microseconds each: launched one by one from the host, the
// launches, not the GPU, set its pace. Replaying a captured graph launches
// them all at once.
//
// The computation must read and write only tensors whose addresses stay fixed
// between replays (static input buffers, the KV cache, the weights), do no
// host synchronisation, and return one output tensor; the output is
// overwritten by the next replay of any graph of the cache. Without a CUDA
// libtorch, available() is false and run() only calls the function.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <utility>

#include <torch/autograd.h>
#include <torch/types.h>

namespace areal::local_inference {

class CudaGraphCache {
 public:
  using Key = std::pair<int64_t, int64_t>;
  CudaGraphCache();
  ~CudaGraphCache();
  CudaGraphCache(const CudaGraphCache&) = delete;
  CudaGraphCache& operator=(const CudaGraphCache&) = delete;

  static bool available();  // this build's libtorch can capture graphs
  // The GPU its graphs capture and replay on (before the first run): calls
  // come from threads whose current device may be another (cuda:0).
  void set_device(const torch::Device& device);
  // The graph for `key` replayed (captured first, after one eager warm-up
  // run of `fn` on the capture stream, when the key is new).
  torch::Tensor run(const Key& key, const std::function<torch::Tensor()>& fn);
  // Forgets every graph (after the buffers they captured were reallocated).
  void clear();
  size_t size() const;

 private:
  struct Graphs;
  std::unique_ptr<Graphs> graphs_;
};

}  // namespace areal::local_inference
