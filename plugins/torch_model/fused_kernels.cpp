#include "fused_kernels.hpp"

#include "kernel_probe.hpp"

#include <cstdint>
#include <cstdlib>
#include <string>
#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <optional>
#include <tuple>

#include <ATen/ATen.h>
#include <torch/version.h>

// at::_flash_attention_forward with optional cumulative offsets (the varlen
// form) and grouped-query heads: libtorch 2.5 and later here.
#if defined(TORCH_VERSION_MAJOR) && (TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 5))
#define AREAL_HAS_VARLEN_FLASH 1
#else
#define AREAL_HAS_VARLEN_FLASH 0
#endif
// at::mm(a, b, out_dtype): bf16/fp16 operands, float32 result (libtorch 2.9 and later here).
#if defined(TORCH_VERSION_MAJOR) && (TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 9))
#define AREAL_HAS_MM_OUT_DTYPE 1
#else
#define AREAL_HAS_MM_OUT_DTYPE 0
#endif

namespace areal::torch_model::fused {
namespace {

[[maybe_unused]] bool half_precision(torch::ScalarType t) { return t == torch::kBFloat16 || t == torch::kHalf; }

// The flash kernels read rows and heads by stride, but load 16-byte vectors:
// each head's values contiguous, rows and heads at multiples of 8 elements,
// an aligned start. A [rows, heads, hd] operand as it lies, or a copy.
[[maybe_unused]] torch::Tensor flash_operand(const torch::Tensor& t) {
  const bool vectors = t.stride(-1) == 1 && t.stride(0) % 8 == 0 && t.stride(1) % 8 == 0 && reinterpret_cast<std::uintptr_t>(t.data_ptr()) % 16 == 0;
  return vectors ? t : t.contiguous();
}

#if AREAL_HAS_VARLEN_FLASH
// The flash call of cached_attention, unchecked.
torch::Tensor flash_over_cache(const torch::Tensor& q, const torch::Tensor& k_cache, const torch::Tensor& v_cache, const torch::Tensor& counts,
                               const torch::Tensor& cu_queries, const torch::Tensor& cu_keys, int64_t longest_query) {
  const int64_t capacity = k_cache.size(1);
  const torch::Tensor k = k_cache.view({-1, k_cache.size(2), k_cache.size(3)}), v = v_cache.view({-1, v_cache.size(2), v_cache.size(3)});
  // max_k is the capacity: a decode step's shape stays fixed while rows grow
  // (one captured graph serves every key count); the kernel reads counts[b].
  return std::get<0>(at::_flash_attention_forward(flash_operand(q), k, v, cu_queries, cu_keys, longest_query, capacity, 0.0,
                                                  /*is_causal=*/longest_query > 1, /*return_debug_mask=*/false, std::nullopt, std::nullopt,
                                                  std::nullopt, counts));
}

#endif

// cached_attention's offsets as the flash kernel takes them: int32, counts
// [B], cu_queries and cu_keys [B+1]. Flash refuses other shapes; checked here
// too, so that CPU tests of the emulated kernel see what a GPU would refuse.
// Shapes only: no device read.
void check_cached_offsets(const torch::Tensor& counts, const torch::Tensor& cu_queries, const torch::Tensor& cu_keys) {
  for (const torch::Tensor* t : {&counts, &cu_queries, &cu_keys})
    if (t->scalar_type() != torch::kInt32 || t->dim() != 1) throw std::invalid_argument("cached_attention: counts and offsets must be int32 vectors");
  if (cu_queries.size(0) != counts.size(0) + 1 || cu_keys.size(0) != counts.size(0) + 1)
    throw std::invalid_argument("cached_attention: " + std::to_string(counts.size(0)) + " sequences need " + std::to_string(counts.size(0) + 1) +
                                " query and key offsets, got " + std::to_string(cu_queries.size(0)) + " and " + std::to_string(cu_keys.size(0)));
}

// The test hook of cached_attention (fused_kernels.hpp), read at each call:
// tests toggle it per process.
bool emulating_cached_attention() {
  const char* e = std::getenv("AREAL_EMULATE_CACHED_ATTENTION");
  return e != nullptr && std::string(e) == "1";
}

}  // namespace

torch::Tensor cached_attention_reference(const torch::Tensor& q, const torch::Tensor& k_cache, const torch::Tensor& v_cache, const torch::Tensor& counts,
                                         const torch::Tensor& cu_queries, const torch::Tensor& cu_keys) {
  check_cached_offsets(counts, cu_queries, cu_keys);
  const int64_t groups = q.size(1) / k_cache.size(2);
  const torch::Tensor k = k_cache.reshape({-1, k_cache.size(2), k_cache.size(3)}), v = v_cache.reshape({-1, v_cache.size(2), v_cache.size(3)});
  const torch::Tensor seen = counts.to(torch::kCPU, torch::kInt64), cu_q = cu_queries.to(torch::kCPU, torch::kInt64), cu_k = cu_keys.to(torch::kCPU, torch::kInt64);
  std::vector<torch::Tensor> out;
  for (int64_t b = 0; b < seen.size(0); ++b) {
    const int64_t n = cu_q[b + 1].item<int64_t>() - cu_q[b].item<int64_t>(), count = seen[b].item<int64_t>(), start = cu_k[b].item<int64_t>();
    const torch::Tensor keys = k.narrow(0, start, count).to(torch::kFloat32).repeat_interleave(groups, 1);  // [count, heads, hd]
    const torch::Tensor vals = v.narrow(0, start, count).to(torch::kFloat32).repeat_interleave(groups, 1);
    const torch::Tensor qb = q.narrow(0, cu_q[b].item<int64_t>(), n).to(torch::kFloat32);
    torch::Tensor scores = torch::einsum("qhd,thd->hqt", {qb, keys}).div(std::sqrt(static_cast<double>(q.size(2))));
    const auto opts = torch::TensorOptions().dtype(torch::kInt64).device(q.device());
    const torch::Tensor key = torch::arange(count, opts).view({1, count}), query = torch::arange(count - n, count, opts).view({n, 1});
    scores = scores.masked_fill(key > query, -std::numeric_limits<double>::infinity());
    out.push_back(torch::einsum("hqt,thd->qhd", {scores.softmax(2), vals}));
  }
  return torch::cat(out, 0).to(q.scalar_type());
}

std::vector<int32_t> nonempty_offsets(const std::vector<int64_t>& bounds) {
  std::vector<int32_t> offsets;
  for (const int64_t b : bounds)
    if (offsets.empty() || offsets.back() != b) offsets.push_back(static_cast<int32_t>(b));
  return offsets;
}

bool varlen_attention_applies(const torch::Device& device, torch::ScalarType dtype, int64_t head_dim) {
#if AREAL_HAS_VARLEN_FLASH
  if (!device.is_cuda() || !half_precision(dtype) || head_dim % 8 != 0 || head_dim > 256) return false;
  return probed("varlen flash attention", device, dtype, [&] {
    const auto opts = torch::TensorOptions().dtype(dtype).device(device);
    const torch::Tensor q = torch::zeros({2, 2, 64}, opts), kv = torch::zeros({2, 1, 64}, opts);
    const torch::Tensor cu = torch::tensor({0, 2}, torch::kInt32).to(device);
    (void)at::_flash_attention_forward(q, kv, kv, cu, cu, 2, 2, 0.0, /*is_causal=*/true, /*return_debug_mask=*/false);
  });
#else
  (void)device, (void)dtype, (void)head_dim;
  return false;
#endif
}

torch::Tensor varlen_causal_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, const torch::Tensor& cu_seqlens,
                                      int64_t longest) {
#if AREAL_HAS_VARLEN_FLASH
  if (!cu_seqlens.defined() || !varlen_attention_applies(q.device(), q.scalar_type(), q.size(-1))) return {};
  return std::get<0>(at::_flash_attention_forward(flash_operand(q), flash_operand(k), flash_operand(v), cu_seqlens, cu_seqlens, longest, longest,
                                                  0.0, /*is_causal=*/true, /*return_debug_mask=*/false));
#else
  (void)q, (void)k, (void)v, (void)cu_seqlens, (void)longest;
  return {};
#endif
}

bool cached_attention_applies(const torch::Device& device, torch::ScalarType dtype, int64_t head_dim) {
  if (emulating_cached_attention()) return true;
#if AREAL_HAS_VARLEN_FLASH
  if (!device.is_cuda() || !half_precision(dtype) || head_dim % 8 != 0 || head_dim > 256) return false;
  return probed(
      "flash attention over cached keys", device, dtype,
      [&] {
        // 4 query heads over 2 KV heads of the model's head size, a cache of 3
        // slots x 1,024 keys whose unread rows hold values that would change
        // the results. Decode steps (rows 0 and 1 seeing 5 and 1,024 keys; row
        // 0 alone seeing 700, where the kernel splits the keys between blocks),
        // then chunks of 3 and 2 new tokens continuing slots 2 and 0 (7 and 300
        // keys). Against the explicit computation on the same rounded inputs.
        constexpr int32_t kCapacity = 1024;
        const auto f32 = torch::TensorOptions().dtype(torch::kFloat32).device(device);
        auto values = [&](std::vector<int64_t> shape, double step) {
          int64_t n = 1;
          for (const int64_t d : shape) n *= d;
          return torch::arange(n, f32).mul(step).sin().view(shape).to(dtype);
        };
        const torch::Tensor k = values({3, kCapacity, 2, head_dim}, 0.11), v = values({3, kCapacity, 2, head_dim}, 0.23);
        auto up = [&](const std::vector<int32_t>& x) { return torch::tensor(x, torch::kInt32).to(device); };
        double worst = 0;
        auto check = [&](const torch::Tensor& q, std::vector<int32_t> counts, std::vector<int32_t> cu_q, std::vector<int32_t> slots, int64_t longest) {
          std::vector<int32_t> cu_k;
          for (const int32_t slot : slots) cu_k.push_back(slot * kCapacity);
          cu_k.push_back(3 * kCapacity);  // B+1 offsets; with counts given, the last is never read
          const torch::Tensor got = flash_over_cache(q, k, v, up(counts), up(cu_q), up(cu_k), longest).to(torch::kFloat32);
          const torch::Tensor want = cached_attention_reference(q, k, v, up(counts), up(cu_q), up(cu_k)).to(torch::kFloat32);
          worst = std::max(worst, (got - want).abs().max().item<double>());
        };
        check(values({2, 4, head_dim}, 0.37), {5, kCapacity}, {0, 1, 2}, {0, 1}, 1);
        check(values({1, 4, head_dim}, 0.31), {700}, {0, 1}, {0}, 1);
        check(values({5, 4, head_dim}, 0.29), {7, 300}, {0, 3, 5}, {2, 0}, 3);
        if (!(worst < 2e-2)) throw std::runtime_error("its results differ from the explicit computation by " + std::to_string(worst));
      },
      head_dim);
#else
  (void)device, (void)dtype, (void)head_dim;
  return false;
#endif
}

torch::Tensor cached_attention(const torch::Tensor& q, const torch::Tensor& k_cache, const torch::Tensor& v_cache, const torch::Tensor& counts,
                               const torch::Tensor& cu_queries, const torch::Tensor& cu_keys, int64_t longest_query) {
  if (counts.defined() && emulating_cached_attention()) return cached_attention_reference(q, k_cache, v_cache, counts, cu_queries, cu_keys);
#if AREAL_HAS_VARLEN_FLASH
  if (!counts.defined() || !k_cache.is_contiguous() || !v_cache.is_contiguous() || !cached_attention_applies(q.device(), q.scalar_type(), q.size(-1)))
    return {};
  check_cached_offsets(counts, cu_queries, cu_keys);
  return flash_over_cache(q, k_cache, v_cache, counts, cu_queries, cu_keys, longest_query);
#else
  (void)q, (void)k_cache, (void)v_cache, (void)counts, (void)cu_queries, (void)cu_keys, (void)longest_query;
  return {};
#endif
}

bool float32_product_applies(const torch::Device& device, torch::ScalarType dtype) {
#if AREAL_HAS_MM_OUT_DTYPE
  if (!device.is_cuda() || !half_precision(dtype)) return false;
  return probed("the bf16/fp16 -> float32 product", device, dtype, [&] {
    const auto opts = torch::TensorOptions().dtype(dtype).device(device);
    (void)at::mm(torch::ones({2, 8}, opts), torch::ones({8, 2}, opts), torch::kFloat32);
  });
#else
  (void)device, (void)dtype;
  return false;
#endif
}

torch::Tensor float32_product(const torch::Tensor& rows, const torch::Tensor& weight) {
#if AREAL_HAS_MM_OUT_DTYPE
  if (rows.scalar_type() != weight.scalar_type() || !float32_product_applies(rows.device(), rows.scalar_type())) return {};
  const torch::Tensor flat = rows.reshape({-1, rows.size(-1)});
  std::vector<int64_t> shape = rows.sizes().vec();
  shape.back() = weight.size(0);
  return at::mm(flat, weight.t(), torch::kFloat32).view(shape);
#else
  (void)rows, (void)weight;
  return {};
#endif
}

torch::Tensor float32_matmul(const torch::Tensor& a, const torch::Tensor& b) {
#if AREAL_HAS_MM_OUT_DTYPE
  if (a.scalar_type() != b.scalar_type() || !float32_product_applies(a.device(), a.scalar_type())) return {};
  return at::mm(a, b, torch::kFloat32);
#else
  (void)a, (void)b;
  return {};
#endif
}

}  // namespace areal::torch_model::fused
