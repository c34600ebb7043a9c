#include "tensor_view.hpp"

#include <cstdint>

#include "areal/sdk.hpp"

namespace areal::algo {

DLTensor* find(const areal_tensor_map& map, const std::string& name) {
  for (size_t i = 0; i < map.count; ++i)
    if (sdk::view(map.names[i]) == name) return map.tensors[i];
  return nullptr;
}

size_t length(const DLTensor& t) { return t.ndim == 1 ? static_cast<size_t>(t.shape[0]) : 0; }

template <class T>
T* vector_of(const areal_tensor_map& map, const std::string& name, uint8_t code, size_t* n) {
  DLTensor* t = find(map, name);
  if (t == nullptr) throw sdk::invalid_argument("tensor '" + name + "' is missing");
  if (t->device.device_type != kDLCPU) throw sdk::invalid_argument("tensor '" + name + "' must be on the CPU");
  if (t->ndim != 1) throw sdk::invalid_argument("tensor '" + name + "' must be 1-D");
  if (t->dtype.code != code || t->dtype.bits != sizeof(T) * 8 || t->dtype.lanes != 1)
    throw sdk::invalid_argument("tensor '" + name + "' has the wrong dtype");
  if (t->strides != nullptr && t->strides[0] != 1) throw sdk::invalid_argument("tensor '" + name + "' must be contiguous");
  *n = length(*t);
  return reinterpret_cast<T*>(static_cast<char*>(t->data) + t->byte_offset);
}

template float* vector_of<float>(const areal_tensor_map&, const std::string&, uint8_t, size_t*);
template int32_t* vector_of<int32_t>(const areal_tensor_map&, const std::string&, uint8_t, size_t*);
template int64_t* vector_of<int64_t>(const areal_tensor_map&, const std::string&, uint8_t, size_t*);

}  // namespace areal::algo
