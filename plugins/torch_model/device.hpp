// Where the torch plugins compute and in what precision: the `device` and
// `dtype` config keys, parsed once here so train and inference agree, and
// the peak-memory reading both report.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <torch/autograd.h>
#include <torch/types.h>

namespace areal::torch_model {

// "auto" (cuda:0 when this libtorch has CUDA and a GPU is visible, else
// cpu), "cpu", "cuda" (cuda:0) or "cuda:N". Throws a clear error when CUDA
// is asked for and this build or machine has none. `what` names the key.
torch::Device parse_device(const std::string& text, const std::string& what);
// "float32", "float64", "bfloat16", "float16".
torch::Dtype parse_dtype(const std::string& text, const std::string& what);
std::string device_name(const torch::Device& d);  // "cpu", "cuda:0"
std::string dtype_name(torch::Dtype d);          // "bfloat16", ...

// A host tensor on `device` without waiting for the device: on CUDA a
// non-blocking copy from pinned memory (a plain .to() from pageable memory
// waits for the stream to drain, a host sync that leaves the GPU idle while
// the next kernels are queued; once a layer, that was a step's tail).
torch::Tensor upload(const torch::Tensor& host, const torch::Device& device);

// The other direction, in two halves: a device tensor's copy to the host is
// queued now (on CUDA into pinned memory, with an event after it) and waited
// for when the host reads it, so the host can queue more work first (the
// local engine's next decode step) and then wait for this copy alone, not for
// everything queued since. On CPU the tensor is simply kept.
class HostCopy {
 public:
  HostCopy() = default;
  explicit HostCopy(const torch::Tensor& t);
  // The copy on the host (waits for the device to have written it).
  const torch::Tensor& get();

 private:
  torch::Tensor host_;
  std::shared_ptr<void> done_;  // a CUDA event recorded after the copy, until waited for
};

// Whether this build of the plugins was compiled against a libtorch with
// CUDA (and so can read the CUDA allocator's statistics).
bool built_with_cuda();

// Peak memory since the last reset: on CUDA the caching allocator's peak of
// allocated bytes on that device; on CPU the process's peak resident set
// (which cannot be reset). Both engines of one process share a device's
// allocator, so on a colocated GPU the number covers both.
int64_t peak_memory_bytes(const torch::Device& d);
void reset_peak_memory(const torch::Device& d);

}  // namespace areal::torch_model
