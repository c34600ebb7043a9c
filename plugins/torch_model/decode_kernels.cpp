#include "decode_kernels.hpp"

#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "decoder_model.hpp"
#include "kernel_probe.hpp"

#if AREAL_HAS_CUDA_KERNELS
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "cuda_kernels/decode_layer_kernels.h"
#endif

namespace areal::torch_model::fused {
namespace {

// The test hook (decode_kernels.hpp), read at each call: tests toggle it per process.
bool emulating() {
  const char* e = std::getenv("AREAL_EMULATE_DECODE_KERNELS");
  return e != nullptr && std::string(e) == "1";
}

// Whether the operands have the shapes and layouts the kernel reads (the
// caller's tensors are then passed as they lie).
bool heads_layout_fits(const torch::Tensor& qk, const torch::Tensor& v, const torch::Tensor& q_norm, const torch::Tensor& k_norm,
                       const torch::Tensor& rope, const torch::Tensor& k_cache, const torch::Tensor& v_cache, const torch::Tensor& slots,
                       const torch::Tensor& positions) {
  if (qk.dim() != 3 || v.dim() != 3 || rope.dim() != 4 || k_cache.dim() != 4 || v_cache.dim() != 4) return false;
  const int64_t S = qk.size(0), hd = qk.size(2), kv = v.size(1);
  const auto dtype = qk.scalar_type();
  for (const torch::Tensor* t : {&v, &rope, &k_cache, &v_cache})
    if (t->scalar_type() != dtype || t->device() != qk.device()) return false;
  if (q_norm.defined() != k_norm.defined()) return false;
  for (const torch::Tensor* w : {&q_norm, &k_norm})
    if (w->defined() && (w->scalar_type() != dtype || w->device() != qk.device() || !w->is_contiguous() || w->numel() != hd)) return false;
  if (qk.size(1) <= kv || qk.stride(2) != 1 || qk.stride(1) != hd) return false;
  if (v.size(0) != S || v.size(2) != hd || v.stride(2) != 1 || v.stride(1) != hd) return false;
  if (rope.size(0) != 2 || rope.size(1) != S || rope.size(2) != 1 || rope.size(3) != hd || rope.stride(3) != 1) return false;
  if (k_cache.sizes() != v_cache.sizes() || k_cache.strides() != v_cache.strides()) return false;
  if (k_cache.size(2) != kv || k_cache.size(3) != hd || k_cache.stride(3) != 1 || k_cache.stride(2) != hd) return false;
  for (const torch::Tensor* t : {&slots, &positions})
    if (t->scalar_type() != torch::kInt64 || t->dim() != 1 || t->size(0) != S || !t->is_contiguous() || t->device() != qk.device()) return false;
  return true;
}

#if AREAL_HAS_CUDA_KERNELS
bool half_precision(torch::ScalarType t) { return t == torch::kBFloat16 || t == torch::kHalf; }

cuda_kernels::Element element_of(torch::ScalarType t) {
  return t == torch::kBFloat16 ? cuda_kernels::Element::kBFloat16 : cuda_kernels::Element::kFloat16;
}

void* stream_of(const torch::Device& device) { return c10::cuda::getCurrentCUDAStream(device.index()).stream(); }

void launched(const char* error, const char* kernel) {
  if (error != nullptr) throw std::runtime_error(std::string(kernel) + ": " + error);
}

torch::Tensor run_heads_into_cache(const torch::Tensor& qk, const torch::Tensor& v, const torch::Tensor& q_norm, const torch::Tensor& k_norm,
                                   double eps, const torch::Tensor& rope, const torch::Tensor& k_cache, const torch::Tensor& v_cache,
                                   const torch::Tensor& slots, const torch::Tensor& positions) {
  const c10::cuda::CUDAGuard on(qk.device());
  const int64_t S = qk.size(0), kv = v.size(1), H = qk.size(1) - kv, hd = qk.size(2);
  torch::Tensor q = torch::empty({S, H, hd}, qk.options());
  cuda_kernels::HeadsIntoCache a;
  a.element = element_of(qk.scalar_type());
  a.rows = S, a.q_heads = H, a.kv_heads = kv, a.head_dim = hd;
  a.qk = qk.data_ptr(), a.qk_row_stride = qk.stride(0);
  a.v = v.data_ptr(), a.v_row_stride = v.stride(0);
  a.q_norm = q_norm.defined() ? q_norm.data_ptr() : nullptr, a.k_norm = k_norm.defined() ? k_norm.data_ptr() : nullptr;
  a.norm_eps = static_cast<float>(eps);
  a.cos = rope[0].data_ptr(), a.sin = rope[1].data_ptr(), a.rope_row_stride = rope.stride(1);
  a.q_out = q.data_ptr();
  a.k_cache = k_cache.data_ptr(), a.v_cache = v_cache.data_ptr();
  a.slots = k_cache.size(0), a.capacity = k_cache.size(1), a.cache_slot_stride = k_cache.stride(0), a.cache_position_stride = k_cache.stride(1);
  a.slot_of_row = slots.data_ptr<int64_t>(), a.position_of_row = positions.data_ptr<int64_t>();
  launched(cuda_kernels::launch_heads_into_cache(a, stream_of(qk.device())), "heads_into_cache");
  return q;
}

torch::Tensor run_silu_times_up(const torch::Tensor& gate, const torch::Tensor& up) {
  const c10::cuda::CUDAGuard on(gate.device());
  torch::Tensor out = torch::empty(gate.sizes(), gate.options());
  cuda_kernels::SiluTimesUp a;
  a.element = element_of(gate.scalar_type());
  a.rows = gate.size(0), a.width = gate.size(1);
  a.gate = gate.data_ptr(), a.gate_row_stride = gate.stride(0);
  a.up = up.data_ptr(), a.up_row_stride = up.stride(0);
  a.out = out.data_ptr();
  launched(cuda_kernels::launch_silu_times_up(a, stream_of(gate.device())), "silu_times_up");
  return out;
}

// Probe tolerance: one rounding step of the element type at the size of the
// largest value of the row (a head, a cache row): float32 sums in another
// order may move the norm's rounding by one step, and RoPE's sum of two
// such terms may nearly cancel, where a wrong index or a missed write is
// off by the values themselves.
void check_close(const torch::Tensor& got, const torch::Tensor& want, const char* what) {
  const torch::Tensor g = got.to(torch::kFloat32), w = want.to(torch::kFloat32);
  const double step = got.scalar_type() == torch::kBFloat16 ? 1.0 / 128 : 1.0 / 1024;
  const torch::Tensor over = (g - w).abs() - (w.abs().amax(-1, /*keepdim=*/true) * (2 * step) + 1e-6);
  if (over.max().item<double>() > 0)
    throw std::runtime_error(std::string(what) + " differ from the reference by " + std::to_string((g - w).abs().max().item<double>()));
}

// values of `shape` in [-2, 2], varied along every dimension.
torch::Tensor probe_values(const torch::Device& device, torch::ScalarType dtype, const std::vector<int64_t>& shape, double step) {
  int64_t n = 1;
  for (const int64_t d : shape) n *= d;
  return torch::arange(n, torch::TensorOptions().dtype(torch::kFloat32).device(device)).mul(step).sin().mul(2).view(shape).to(dtype);
}

// heads_into_cache on a small case of the model's head size against its
// reference, with and without the per-head norm: q's and k's heads side by
// side in a row with v's after them (the joined product), rows writing
// slots out of order, the caches' other rows holding values that must stay.
void probe_heads_into_cache(const torch::Device& device, torch::ScalarType dtype, int64_t hd) {
  auto values = [&](const std::vector<int64_t>& shape, double step) { return probe_values(device, dtype, shape, step); };
  constexpr int64_t S = 5, H = 4, kv = 2;
  const torch::Tensor joined = values({S, (H + 2 * kv) * hd}, 0.37);
  const torch::Tensor qk = joined.narrow(1, 0, (H + kv) * hd).view({S, H + kv, hd}), v = joined.narrow(1, (H + kv) * hd, kv * hd).view({S, kv, hd});
  const auto f32 = torch::TensorOptions().dtype(torch::kFloat32).device(device);
  const torch::Tensor angles = torch::tensor({7.0, 3.0, 15.0, 0.0, 1.0}, f32).view({S, 1}) * torch::arange(hd / 2, f32).mul(-0.2).exp().view({1, -1});
  const torch::Tensor both = torch::cat({angles, angles}, 1), sin = angles.sin();
  const torch::Tensor rope = torch::stack({both.cos(), torch::cat({-sin, sin}, 1)}).to(dtype).unsqueeze(2);
  const auto idx = torch::TensorOptions().dtype(torch::kInt64).device(device);
  const torch::Tensor slots = torch::tensor({2, 0, 1, 0, 2}, idx), positions = torch::tensor({7, 3, 15, 0, 1}, idx);
  for (const bool norm : {true, false}) {
    const torch::Tensor q_norm = norm ? values({hd}, 0.11).add(1) : torch::Tensor(), k_norm = norm ? values({hd}, 0.13).add(1) : torch::Tensor();
    const torch::Tensor k_cache = values({3, 16, kv, hd}, 0.05), v_cache = values({3, 16, kv, hd}, 0.07);
    const torch::Tensor k_want = k_cache.clone(), v_want = v_cache.clone();
    const torch::Tensor q = run_heads_into_cache(qk, v, q_norm, k_norm, 1e-6, rope, k_cache, v_cache, slots, positions);
    const torch::Tensor q_want = heads_into_cache_reference(qk, v, q_norm, k_norm, 1e-6, rope, k_want, v_want, slots, positions);
    check_close(q, q_want, "its queries");
    check_close(k_cache, k_want, "its key cache");
    check_close(v_cache, v_want, "its value cache");
  }
}

// silu_times_up on the two halves of a joined product against its reference.
void probe_silu_times_up(const torch::Device& device, torch::ScalarType dtype) {
  const torch::Tensor gate_up = probe_values(device, dtype, {3, 2 * 40}, 0.29);
  const torch::Tensor gate = gate_up.narrow(1, 0, 40), up = gate_up.narrow(1, 40, 40);
  check_close(run_silu_times_up(gate, up), silu_times_up_reference(gate, up), "its products");
}

bool heads_into_cache_probed(const torch::Device& device, torch::ScalarType dtype, int64_t hd) {
  if (!device.is_cuda() || !half_precision(dtype) || hd % 2 != 0 || hd <= 0 || hd > cuda_kernels::kMaxHeadDim) return false;
  return probed("areal's heads_into_cache kernel", device, dtype, [&] { probe_heads_into_cache(device, dtype, hd); }, hd);
}

bool silu_times_up_probed(const torch::Device& device, torch::ScalarType dtype) {
  if (!device.is_cuda() || !half_precision(dtype)) return false;
  return probed("areal's silu_times_up kernel", device, dtype, [&] { probe_silu_times_up(device, dtype); });
}
#endif

}  // namespace

bool decode_kernels_apply(const torch::Device& device, torch::ScalarType dtype, int64_t head_dim) {
  if (emulating()) return true;
#if AREAL_HAS_CUDA_KERNELS
  const bool heads = heads_into_cache_probed(device, dtype, head_dim);  // both asked: each says once why it does not apply
  return silu_times_up_probed(device, dtype) && heads;
#else
  (void)device, (void)dtype, (void)head_dim;
  return false;
#endif
}

torch::Tensor heads_into_cache_reference(const torch::Tensor& qk, const torch::Tensor& v, const torch::Tensor& q_norm, const torch::Tensor& k_norm,
                                         double eps, const torch::Tensor& rope, const torch::Tensor& k_cache, const torch::Tensor& v_cache,
                                         const torch::Tensor& slots, const torch::Tensor& positions) {
  const int64_t kv = v.size(1), H = qk.size(1) - kv;
  torch::Tensor heads = qk;
  if (q_norm.defined()) heads = torch::cat({portable_rms_norm(qk.narrow(1, 0, H), q_norm, eps), portable_rms_norm(qk.narrow(1, H, kv), k_norm, eps)}, 1);
  const torch::Tensor rotated = torch::addcmul(heads * rope[0], halves_swapped(heads), rope[1]);
  k_cache.index_put_({slots, positions}, rotated.narrow(1, H, kv));
  v_cache.index_put_({slots, positions}, v);
  return rotated.narrow(1, 0, H).contiguous();
}

torch::Tensor heads_into_cache(const torch::Tensor& qk, const torch::Tensor& v, const torch::Tensor& q_norm, const torch::Tensor& k_norm, double eps,
                               const torch::Tensor& rope, const torch::Tensor& k_cache, const torch::Tensor& v_cache, const torch::Tensor& slots,
                               const torch::Tensor& positions) {
  if (!heads_layout_fits(qk, v, q_norm, k_norm, rope, k_cache, v_cache, slots, positions)) return {};
  if (emulating()) return heads_into_cache_reference(qk, v, q_norm, k_norm, eps, rope, k_cache, v_cache, slots, positions);
#if AREAL_HAS_CUDA_KERNELS
  if (!heads_into_cache_probed(qk.device(), qk.scalar_type(), qk.size(2))) return {};
  return run_heads_into_cache(qk, v, q_norm, k_norm, eps, rope, k_cache, v_cache, slots, positions);
#else
  (void)eps;
  return {};
#endif
}

torch::Tensor silu_times_up_reference(const torch::Tensor& gate, const torch::Tensor& up) { return torch::silu(gate) * up; }

torch::Tensor silu_times_up(const torch::Tensor& gate, const torch::Tensor& up) {
  if (gate.dim() != 2 || gate.sizes() != up.sizes() || gate.stride(1) != 1 || up.stride(1) != 1 || gate.scalar_type() != up.scalar_type() ||
      gate.device() != up.device())
    return {};
  if (emulating()) return silu_times_up_reference(gate, up);
#if AREAL_HAS_CUDA_KERNELS
  if (!silu_times_up_probed(gate.device(), gate.scalar_type())) return {};
  return run_silu_times_up(gate, up);
#else
  return {};
#endif
}

}  // namespace areal::torch_model::fused
