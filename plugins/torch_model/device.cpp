#include "device.hpp"

#include <sys/resource.h>

#include <torch/cuda.h>

#include "core/plugin_host/error.hpp"

#ifdef AREAL_TORCH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDACachingAllocator.h>
#endif

namespace areal::torch_model {

bool built_with_cuda() {
#ifdef AREAL_TORCH_CUDA
  return true;
#else
  return false;
#endif
}

torch::Tensor upload(const torch::Tensor& host, const torch::Device& device) {
  if (!device.is_cuda() || !host.device().is_cpu()) return host.to(device);
  return host.pin_memory().to(device, /*non_blocking=*/true);  // the pinned block outlives the copy (the host allocator waits on it)
}

HostCopy::HostCopy(const torch::Tensor& t) {
  if (!t.device().is_cuda()) {
    host_ = t;  // computed already: CPU kernels run as they are called
    return;
  }
#ifdef AREAL_TORCH_CUDA
  host_ = torch::empty(t.sizes(), t.options().device(torch::kCPU).pinned_memory(true));
  host_.copy_(t, /*non_blocking=*/true);
  auto event = std::make_shared<at::cuda::CUDAEvent>();
  event->record(at::cuda::getCurrentCUDAStream(t.device().index()));
  done_ = std::move(event);
#else
  host_ = t.to(torch::kCPU);  // a CUDA tensor in a build without CUDA headers cannot occur; stay correct anyway
#endif
}

const torch::Tensor& HostCopy::get() {
#ifdef AREAL_TORCH_CUDA
  if (done_) static_cast<at::cuda::CUDAEvent*>(done_.get())->synchronize();
#endif
  done_.reset();
  return host_;
}

torch::Device parse_device(const std::string& text, const std::string& what) {
  if (text == "auto" || text.empty()) return torch::cuda::is_available() ? torch::Device(torch::kCUDA, 0) : torch::Device(torch::kCPU);
  if (text == "cpu") return torch::kCPU;
  if (text == "cuda" || text.rfind("cuda:", 0) == 0) {
    int index = 0;
    if (text != "cuda") {
      const std::string n = text.substr(5);
      if (n.empty() || n.find_first_not_of("0123456789") != std::string::npos || n.size() > 4)
        throw Error(AREAL_CODE_INVALID_ARGUMENT, what + ": '" + text + "' is not a device (cpu, cuda, cuda:N or auto)");
      index = std::stoi(n);
    }
    if (!torch::cuda::is_available())
      throw Error(AREAL_CODE_UNSUPPORTED, what + " is '" + text + "' but " +
                                              (at::hasCUDA() ? std::string("no GPU is visible to this process")
                                                                : std::string("this libtorch has no CUDA (areal was built against a CPU "
                                                                              "libtorch; see docs/gpu.md to build against PyTorch's)")));
    const auto count = static_cast<int>(torch::cuda::device_count());
    if (index >= count)
      throw Error(AREAL_CODE_INVALID_ARGUMENT, what + " is '" + text + "' but only " + std::to_string(count) + " GPU(s) are visible");
    return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(index));
  }
  throw Error(AREAL_CODE_INVALID_ARGUMENT, what + ": '" + text + "' is not a device (cpu, cuda, cuda:N or auto)");
}

torch::Dtype parse_dtype(const std::string& text, const std::string& what) {
  if (text == "float32") return torch::kFloat32;
  if (text == "float64") return torch::kFloat64;
  if (text == "bfloat16") return torch::kBFloat16;
  if (text == "float16") return torch::kFloat16;
  throw Error(AREAL_CODE_INVALID_ARGUMENT, what + ": '" + text + "' is not a dtype (bfloat16, float16, float32 or float64)");
}

std::string device_name(const torch::Device& d) {
  return d.is_cuda() ? "cuda:" + std::to_string(d.has_index() ? d.index() : 0) : "cpu";
}

std::string dtype_name(torch::Dtype d) {
  switch (d) {
    case torch::kFloat32: return "float32";
    case torch::kFloat64: return "float64";
    case torch::kBFloat16: return "bfloat16";
    case torch::kFloat16: return "float16";
    default: return "other";
  }
}

int64_t peak_memory_bytes(const torch::Device& d) {
  if (d.is_cuda()) {
#ifdef AREAL_TORCH_CUDA
    // allocated_bytes[0] is the aggregate over pool types (the same index in 1.13 and 2.x).
    return c10::cuda::CUDACachingAllocator::getDeviceStats(d.index()).allocated_bytes[0].peak;
#else
    return 0;
#endif
  }
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<int64_t>(u.ru_maxrss) * 1024;  // kilobytes on Linux
}

void reset_peak_memory(const torch::Device& d) {
#ifdef AREAL_TORCH_CUDA
  if (d.is_cuda()) c10::cuda::CUDACachingAllocator::resetPeakStats(d.index());
#else
  (void)d;
#endif
}

}  // namespace areal::torch_model
