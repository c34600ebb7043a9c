#include "core/trainer/batch_slices.hpp"

#include <algorithm>
#include <cmath>
#include <string_view>

#include "core/plugin_host/error.hpp"

namespace areal::trainer {

namespace {

std::string_view name_at(const areal_tensor_map& m, size_t i) { return {m.names[i].data, m.names[i].size}; }

int64_t int_at(const DLTensor& t, int64_t i) {
  const char* base = static_cast<const char*>(t.data) + t.byte_offset;
  if (t.dtype.code == kDLInt && t.dtype.bits == 32) return reinterpret_cast<const int32_t*>(base)[i];
  if (t.dtype.code == kDLInt && t.dtype.bits == 64) return reinterpret_cast<const int64_t*>(base)[i];
  throw Error(AREAL_CODE_INVALID_ARGUMENT, "cu_seqlens must be int32 or int64");
}

}  // namespace

std::vector<int64_t> cu_seqlens_of(const areal_tensor_map& batch) {
  for (size_t i = 0; i < batch.count; ++i) {
    if (name_at(batch, i) != "cu_seqlens") continue;
    const DLTensor& t = *batch.tensors[i];
    if (t.ndim != 1 || t.shape[0] < 1) throw Error(AREAL_CODE_INVALID_ARGUMENT, "cu_seqlens must be a 1-D tensor of B + 1 offsets");
    std::vector<int64_t> cu(t.shape[0]);
    for (int64_t k = 0; k < t.shape[0]; ++k) cu[k] = int_at(t, k);
    return cu;
  }
  throw Error(AREAL_CODE_INVALID_ARGUMENT, "the batch has no cu_seqlens");
}

std::vector<int64_t> shared_prefixes(const areal_tensor_map& batch) {
  const std::vector<int64_t> cu = cu_seqlens_of(batch);
  for (size_t i = 0; i < batch.count; ++i) {
    if (name_at(batch, i) != "input_ids") continue;
    const DLTensor& t = *batch.tensors[i];
    const bool integer = t.dtype.code == kDLInt && (t.dtype.bits == 32 || t.dtype.bits == 64);
    if (!integer || t.device.device_type != kDLCPU || t.ndim != 1 || t.strides != nullptr || t.shape[0] != cu.back() - cu.front()) break;
    std::vector<int64_t> out(cu.size() - 1, 0);
    for (size_t b = 1; b + 1 < cu.size(); ++b) {
      int64_t n = 0;
      const int64_t here = cu[b] - cu[0], before = cu[b - 1] - cu[0], len = std::min(cu[b + 1] - cu[b], cu[b] - cu[b - 1]);
      while (n < len && int_at(t, here + n) == int_at(t, before + n)) ++n;
      out[b] = n;
    }
    return out;
  }
  return {};  // no host input_ids: cut by tokens alone
}

std::vector<BatchSlice> plan_slices(const std::vector<int64_t>& cu, int parts, const std::vector<int64_t>& shared, const std::string& parts_name,
                                    int64_t min_rows) {
  const int64_t B = static_cast<int64_t>(cu.size()) - 1;
  if (parts < 1 || min_rows < 1) throw Error(AREAL_CODE_INVALID_ARGUMENT, "cannot split a batch into " + std::to_string(parts) + " " + parts_name);
  if (B < parts * min_rows)
    throw Error(AREAL_CODE_INVALID_ARGUMENT, "the batch has " + std::to_string(B) + " sequences, fewer than the " + std::to_string(parts) +
                                                 " " + parts_name + " need (" + std::to_string(min_rows) + " each)");
  const int64_t total = cu[B] - cu[0];
  std::vector<BatchSlice> out;
  int64_t begin = 0;
  for (int r = 0; r < parts; ++r) {
    int64_t end = B;
    if (r + 1 < parts) {
      // The boundary nearest the ideal token count, leaving min_rows sequences for each later part.
      const double target = cu[0] + static_cast<double>(total) * (r + 1) / parts;
      end = begin + min_rows;
      const int64_t last = B - (parts - r - 1) * min_rows;
      while (end < last && std::abs(cu[end + 1] - target) <= std::abs(cu[end] - target)) ++end;
      if (static_cast<int64_t>(shared.size()) == B) {
        // Within the slack, the cut that splits the least shared prefix.
        const double slack = std::max(std::abs(cu[end] - target), static_cast<double>(total) / parts / 4);
        int64_t best = end;
        for (int64_t e = begin + min_rows; e <= last; ++e) {
          if (std::abs(cu[e] - target) > slack) continue;
          if (shared[e] < shared[best] || (shared[e] == shared[best] && std::abs(cu[e] - target) < std::abs(cu[best] - target))) best = e;
        }
        end = best;
      }
    }
    out.push_back({begin, end, cu[begin], cu[end]});
    begin = end;
  }
  return out;
}

}  // namespace areal::trainer
