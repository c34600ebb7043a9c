#include "batch_split.hpp"

#include <algorithm>
#include <cstring>
#include <string>
#include <string_view>

#include "core/plugin_host/error.hpp"

namespace areal::host::ranks {

namespace {

std::string_view name_at(const areal_tensor_map& m, size_t i) { return {m.names[i].data, m.names[i].size}; }

// Rows [begin, end) of a tensor (along its first dimension; a row is one
// element of a 1-D tensor, or e.g. [layers, k] of routed_experts) as a new tensor.
OwnedTensor slice(const std::string& name, const DLTensor& t, int64_t begin, int64_t end) {
  OwnedTensor part;
  part.name = name;
  part.dtype = t.dtype;
  part.shape.assign(t.shape, t.shape + t.ndim);
  part.shape[0] = end - begin;
  int64_t row = 1;
  for (int32_t d = 1; d < t.ndim; ++d) row *= t.shape[d];
  const int64_t e = static_cast<int64_t>((t.dtype.bits * t.dtype.lanes + 7) / 8) * row;  // bytes per row
  if (t.device.device_type == kDLCPU && t.strides == nullptr) {  // the usual case: copy the range only
    const char* base = static_cast<const char*>(t.data) + t.byte_offset;
    part.bytes.assign(base + begin * e, base + end * e);
    return part;
  }
  OwnedTensor whole = OwnedTensor::copy_of(name, t);
  part.bytes.assign(whole.bytes.begin() + begin * e, whole.bytes.begin() + end * e);
  return part;
}

}  // namespace

std::vector<std::vector<OwnedTensor>> split_batch(const areal_tensor_map& batch, const std::vector<BatchSlice>& slices) {
  const std::vector<int64_t> cu = cu_seqlens_of(batch);
  const int64_t B = static_cast<int64_t>(cu.size()) - 1, T = cu[B] - cu[0];
  std::vector<std::vector<OwnedTensor>> out(slices.size());
  for (size_t i = 0; i < batch.count; ++i) {
    const std::string name(name_at(batch, i));
    const DLTensor& t = *batch.tensors[i];
    for (size_t r = 0; r < slices.size(); ++r) {
      const BatchSlice& s = slices[r];
      if (t.ndim == 0) {
        out[r].push_back(OwnedTensor::copy_of(name, t));
      } else if (name == "cu_seqlens") {
        OwnedTensor c;
        c.name = name;
        c.dtype = t.dtype;
        c.shape = {s.end_sequence - s.first_sequence + 1};
        c.bytes.resize(static_cast<size_t>(c.shape[0]) * c.element_size());
        for (int64_t k = 0; k < c.shape[0]; ++k) {
          const int64_t v = cu[s.first_sequence + k] - cu[s.first_sequence];
          if (c.dtype.bits == 32) reinterpret_cast<int32_t*>(c.bytes.data())[k] = static_cast<int32_t>(v);
          else reinterpret_cast<int64_t*>(c.bytes.data())[k] = v;
        }
        out[r].push_back(std::move(c));
      } else if (t.ndim >= 1 && t.shape[0] == T) {  // per token (also right when every sequence is one token long)
        out[r].push_back(slice(name, t, s.first_token - cu[0], s.end_token - cu[0]));
      } else if (t.ndim == 1 && t.shape[0] == B) {  // per sequence
        out[r].push_back(slice(name, t, s.first_sequence, s.end_sequence));
      } else {
        throw Error(AREAL_CODE_INVALID_ARGUMENT, "batch tensor '" + name + "' is neither per token (" + std::to_string(T) +
                                                     ") nor per sequence (" + std::to_string(B) + "), so it cannot be split over train ranks");
      }
    }
  }
  return out;
}

}  // namespace areal::host::ranks
