// Host-owned CPU tensors (1-D, or rows of a fixed inner shape) exposed as DLPack, and areal_tensor_map
// building, for handing batches to algorithm and train plugins.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include <dlpack/dlpack.h>

#include "areal/tensors.h"

namespace areal {

template <class T>
class HostTensor {
 public:
  explicit HostTensor(std::vector<T> values = {}) : values_(std::move(values)) { refresh(); }
  HostTensor(const HostTensor& o) : values_(o.values_), inner_(o.inner_) { refresh(); }
  HostTensor& operator=(const HostTensor& o) {
    values_ = o.values_;
    inner_ = o.inner_;
    refresh();
    return *this;
  }

  std::vector<T>& values() { return values_; }
  const std::vector<T>& values() const { return values_; }
  // Every row of the tensor is `inner` (e.g. {layers, k}): the tensor is
  // [values / prod(inner), inner...]. Empty (the default): 1-D.
  void set_inner_shape(std::vector<int64_t> inner) {
    inner_ = std::move(inner);
    refresh();
  }
  DLTensor* dl() {
    refresh();  // values_ may have been resized since
    return &tensor_;
  }

 private:
  void refresh() {
    int64_t row = 1;
    for (const int64_t d : inner_) row *= d;
    shape_.assign(1, row > 0 ? static_cast<int64_t>(values_.size()) / row : 0);
    shape_.insert(shape_.end(), inner_.begin(), inner_.end());
    tensor_.data = values_.data();
    tensor_.device = DLDevice{kDLCPU, 0};
    tensor_.ndim = static_cast<int32_t>(shape_.size());
    tensor_.dtype.code = std::is_floating_point_v<T> ? kDLFloat : kDLInt;
    tensor_.dtype.bits = sizeof(T) * 8;
    tensor_.dtype.lanes = 1;
    tensor_.shape = shape_.data();
    tensor_.strides = nullptr;
    tensor_.byte_offset = 0;
  }

  std::vector<T> values_;
  std::vector<int64_t> inner_;
  std::vector<int64_t> shape_;
  DLTensor tensor_{};
};

// A host-owned 0-d CPU tensor: batch-level scalars such as "policy_version".
template <class T>
class HostScalar {
 public:
  explicit HostScalar(T value = T()) : value_(value) {}
  HostScalar(const HostScalar&) = delete;
  HostScalar& operator=(const HostScalar&) = delete;
  T& value() { return value_; }
  const T& value() const { return value_; }
  DLTensor* dl() {
    tensor_.data = &value_;
    tensor_.device = DLDevice{kDLCPU, 0};
    tensor_.ndim = 0;
    tensor_.dtype.code = std::is_floating_point_v<T> ? kDLFloat : kDLInt;
    tensor_.dtype.bits = sizeof(T) * 8;
    tensor_.dtype.lanes = 1;
    tensor_.shape = nullptr;
    tensor_.strides = nullptr;
    tensor_.byte_offset = 0;
    return &tensor_;
  }

 private:
  T value_;
  DLTensor tensor_{};
};

// Collects named tensors into an areal_tensor_map. The tensors must outlive
// the map's use.
class TensorMapBuilder {
 public:
  TensorMapBuilder& add(const std::string& name, DLTensor* tensor) {
    names_.push_back(name);
    tensors_.push_back(tensor);
    return *this;
  }
  const areal_tensor_map* get() {
    views_.clear();
    for (const auto& n : names_) views_.push_back(areal_str{n.data(), n.size()});
    map_ = areal_tensor_map{AREAL_OFFSET_OF_END(areal_tensor_map, count), views_.data(), tensors_.data(), tensors_.size()};
    return &map_;
  }

 private:
  std::vector<std::string> names_;
  std::vector<areal_str> views_;
  std::vector<DLTensor*> tensors_;
  areal_tensor_map map_{};
};

}  // namespace areal
