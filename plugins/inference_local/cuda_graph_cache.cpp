#include "cuda_graph_cache.hpp"

#include <string>
#include <utility>
#include <exception>
#include <mutex>

#ifdef AREAL_TORCH_CUDA
#include <ATen/cuda/CUDAGeneratorImpl.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/cuda.h>
#endif

namespace areal::local_inference {

#ifdef AREAL_TORCH_CUDA

struct CudaGraphCache::Graphs {
  struct Entry {
    std::unique_ptr<at::cuda::CUDAGraph> graph;
    torch::Tensor output;
  };
  std::map<Key, Entry> entries;
  // One memory pool for every graph: they never replay at once, so their
  // intermediates may share memory (as nano-vLLM's and vLLM's graphs do).
  decltype(std::declval<at::cuda::CUDAGraph&>().pool()) pool{0, 0};
  c10::DeviceIndex device = 0;
};

CudaGraphCache::CudaGraphCache() : graphs_(std::make_unique<Graphs>()) {}
CudaGraphCache::~CudaGraphCache() = default;

bool CudaGraphCache::available() { return true; }

void CudaGraphCache::set_device(const torch::Device& device) {
  if (device.is_cuda() && device.has_index()) graphs_->device = device.index();
}

torch::Tensor CudaGraphCache::run(const Key& key, const std::function<torch::Tensor()>& fn) {
  // The graphs' GPU current on this thread: a capture stream of another
  // device would capture nothing (the kernels go to their own device's stream).
  const c10::cuda::CUDAGuard on_device(graphs_->device);
  auto it = graphs_->entries.find(key);
  if (it == graphs_->entries.end()) {
    Graphs::Entry e;
    // Capture on a stream of its own (the default stream cannot be captured),
    // after everything queued so far has run and one warm-up run on that
    // stream (first-use allocations and library handles happen outside the
    // capture). Thread-local mode: another thread of the process (a
    // colocated trainer) keeps its CUDA calls while this one captures.
    torch::cuda::synchronize(graphs_->device);
    c10::cuda::CUDAStream stream = c10::cuda::getStreamFromPool(false, graphs_->device);
    {
      c10::cuda::CUDAStreamGuard guard(stream);
      fn();
      stream.synchronize();
      e.graph = std::make_unique<at::cuda::CUDAGraph>();
      // While a capture is open, libtorch marks the device's default
      // generator as capturing, and a random draw on another thread (a
      // colocated trainer's LoRA dropout) would fail its check. Such draws
      // take the generator's lock first, so holding it makes them wait for
      // the capture's end; the decode step itself draws nothing from it.
      at::Generator generator = at::cuda::detail::getDefaultCUDAGenerator(graphs_->device);
      std::lock_guard<std::mutex> no_draws(generator.mutex());
      e.graph->capture_begin(graphs_->pool, cudaStreamCaptureModeThreadLocal);
      try {
        e.output = fn();
      } catch (...) {
        try {
          e.graph->capture_end();
        } catch (...) {
          // The capture is already broken; the first error says why.
        }
        throw;
      }
      e.graph->capture_end();
      if (graphs_->pool.first == 0 && graphs_->pool.second == 0) graphs_->pool = e.graph->pool();
    }
    torch::cuda::synchronize(graphs_->device);
    it = graphs_->entries.emplace(key, std::move(e)).first;
  }
  it->second.graph->replay();  // on the device's current stream, after its input copies
  return it->second.output;
}

void CudaGraphCache::clear() {
  // Nothing captured, nothing to wait for: an engine on the CPU with a CUDA
  // libtorch may have no GPU to synchronize with at all.
  if (graphs_->entries.empty()) return;
  // No replay still reading what the graphs held. If the device cannot say
  // (a fault earlier), the graphs go anyway: none may replay over a new cache.
  std::exception_ptr unsynchronized;
  try {
    torch::cuda::synchronize(graphs_->device);
  } catch (...) {
    unsynchronized = std::current_exception();
  }
  graphs_->entries.clear();
  graphs_->pool = {0, 0};
  if (unsynchronized) std::rethrow_exception(unsynchronized);
}

size_t CudaGraphCache::size() const { return graphs_->entries.size(); }

#else  // a CPU-only libtorch: nothing to capture

struct CudaGraphCache::Graphs {};

CudaGraphCache::CudaGraphCache() = default;
CudaGraphCache::~CudaGraphCache() = default;
bool CudaGraphCache::available() { return false; }
void CudaGraphCache::set_device(const torch::Device&) {}
torch::Tensor CudaGraphCache::run(const Key&, const std::function<torch::Tensor()>& fn) { return fn(); }
void CudaGraphCache::clear() {}
size_t CudaGraphCache::size() const { return 0; }

#endif

}  // namespace areal::local_inference
