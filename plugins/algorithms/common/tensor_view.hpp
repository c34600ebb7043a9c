// Checked access to named DLPack tensors in an areal_tensor_map (CPU,
// contiguous, exact dtype), for algorithm plugins.
#pragma once

#include <string>
#include <cstdint>

#include "areal/plugin_api.h"

namespace areal::algo {

// The tensor named `name`, or nullptr.
DLTensor* find(const areal_tensor_map& map, const std::string& name);

// Like find, but throws INVALID_ARGUMENT unless it is a 1-D, contiguous CPU
// tensor of the given dtype code/bits. Returns its element count in *n.
template <class T>
T* vector_of(const areal_tensor_map& map, const std::string& name, uint8_t code, size_t* n);

// The element count of a 1-D tensor.
size_t length(const DLTensor& t);

}  // namespace areal::algo
