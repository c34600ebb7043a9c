#include "fused_kernels.hpp"

#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>
#include <exception>

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

// Runs `probe` once per (kernel, device, dtype) and remembers whether it
// worked; the first refusal is printed once, with libtorch's reason.
[[maybe_unused]] bool probed(const char* kernel, const torch::Device& device, torch::ScalarType dtype, const std::function<void()>& probe) {
  static std::mutex mu;
  static std::map<std::tuple<const char*, int, int>, bool> known;  // kernel names are literals: no string built a call
  const auto key = std::make_tuple(kernel, static_cast<int>(device.index()), static_cast<int>(dtype));
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = known.find(key); it != known.end()) return it->second;
  bool ok = true;
  try {
    probe();
  } catch (const std::exception& e) {
    ok = false;
    const std::string why = e.what();
    std::fprintf(stderr, "areal torch_model: %s is not available on %s (%s); using the portable path\n", kernel, device.str().c_str(),
                 why.substr(0, why.find('\n')).c_str());
  }
  known[key] = ok;
  return ok;
}

}  // namespace

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
  // The kernel reads rows and heads by stride, but loads 16-byte vectors: each
  // head's values contiguous, rows and heads at multiples of 8 elements, an aligned start.
  auto inner = [](const torch::Tensor& t) {
    const bool vectors = t.stride(-1) == 1 && t.stride(0) % 8 == 0 && t.stride(1) % 8 == 0 && reinterpret_cast<std::uintptr_t>(t.data_ptr()) % 16 == 0;
    return vectors ? t : t.contiguous();
  };
  return std::get<0>(at::_flash_attention_forward(inner(q), inner(k), inner(v), cu_seqlens, cu_seqlens, longest, longest, 0.0, /*is_causal=*/true,
                                                  /*return_debug_mask=*/false));
#else
  (void)q, (void)k, (void)v, (void)cu_seqlens, (void)longest;
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
