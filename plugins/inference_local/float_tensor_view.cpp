#include "float_tensor_view.hpp"

#include <vector>
#include <cstdint>

#include <torch/cuda.h>

#include "areal/sdk.hpp"

namespace areal::local_inference {

torch::Tensor float_tensor_view(const DLTensor& t, const std::string& what) {
  namespace sdk = areal::sdk;
  if ((t.device.device_type != kDLCPU && t.device.device_type != kDLCUDA) || t.dtype.lanes != 1 ||
      (t.dtype.code != kDLFloat && t.dtype.code != kDLBfloat))
    throw sdk::invalid_argument(what + " must be a floating-point CPU or CUDA tensor");
  if (t.device.device_type == kDLCUDA && !torch::cuda::is_available())
    throw sdk::invalid_argument(what + " is a CUDA tensor but this engine's libtorch has no CUDA");
  if (t.strides != nullptr) throw sdk::invalid_argument(what + " must be contiguous");
  torch::Dtype dt;
  if (t.dtype.code == kDLBfloat && t.dtype.bits == 16) dt = torch::kBFloat16;
  else if (t.dtype.code == kDLFloat && t.dtype.bits == 16) dt = torch::kFloat16;
  else if (t.dtype.code == kDLFloat && t.dtype.bits == 32) dt = torch::kFloat32;
  else if (t.dtype.code == kDLFloat && t.dtype.bits == 64) dt = torch::kFloat64;
  else throw sdk::invalid_argument(what + " has an unsupported float width");
  const std::vector<int64_t> shape(t.shape, t.shape + t.ndim);
  // A CUDA source is read where it lies: copied device to device, no host round trip.
  const torch::Device device = t.device.device_type == kDLCUDA ? torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(t.device.device_id))
                                                               : torch::Device(torch::kCPU);
  return torch::from_blob(static_cast<char*>(t.data) + t.byte_offset, shape, torch::TensorOptions().dtype(dt).device(device));
}

}  // namespace areal::local_inference
