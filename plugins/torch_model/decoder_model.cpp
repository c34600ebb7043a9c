#include "decoder_model.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <optional>
#include <vector>
#include <tuple>

#include <ATen/Context.h>
#include <torch/utils.h>
#include <torch/version.h>

#include "attention_layout.hpp"
#include "device.hpp"
#include "random_state.hpp"
#include "decode_kernels.hpp"
#include "fused_kernels.hpp"
#include "core/plugin_host/error.hpp"

// torch::scaled_dot_product_attention arrived in libtorch 2.0; 1.13 (Debian's)
// keeps the explicit path. It is used on CUDA only: where no fused kernel
// applies (CPU, float64) its math fallback builds the whole score matrix,
// which the explicit path's query blocks avoid for long agent prompts.
#if defined(TORCH_VERSION_MAJOR) && TORCH_VERSION_MAJOR >= 2
#define AREAL_HAS_SDPA 1
#else
#define AREAL_HAS_SDPA 0
#endif
// at::_fused_rms_norm as called below (one CUDA kernel, with its backward)
// arrived in 2.9; 2.8's op of that name takes other arguments (MPS only).
#if defined(TORCH_VERSION_MAJOR) && (TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 9))
#define AREAL_HAS_FUSED_RMS_NORM 1
#else
#define AREAL_HAS_FUSED_RMS_NORM 0
#endif
// Its enable_gqa argument (grouped-query attention without repeating K/V) arrived in 2.5.
#if AREAL_HAS_SDPA && (TORCH_VERSION_MAJOR > 2 || TORCH_VERSION_MINOR >= 5)
#define AREAL_HAS_SDPA_GQA 1
#else
#define AREAL_HAS_SDPA_GQA 0
#endif

namespace areal::torch_model {
namespace {

// Rotary inverse frequencies, with Llama 3's frequency-dependent scaling,
// linear scaling or YaRN, in float32 and op for op as transformers computes
// them (modeling_rope_utils; vLLM and SGLang use the same float32 formula):
// a float64 table is closer to the exact angles, but differs from the
// engines whose log-probs the trainer compares with by ~p * 6e-8 radians at
// position p (1e-3 at 16k), which is token drift on long agent contexts.
// Scalar-over-tensor divisions are reciprocal() * scalar, as PyTorch does.
torch::Tensor inverse_frequencies(const model::ModelConfig& c) {
  const int64_t dim = c.head_dim;
  const torch::Tensor pos_freqs = torch::pow(c.rope_theta, torch::arange(0, dim, 2, torch::kInt64).to(torch::kFloat32) / dim);
  torch::Tensor inv = pos_freqs.reciprocal();  // 1.0 / base ** (arange / dim)
  if (!c.rope_scaling.is_object()) return inv;
  const std::string type = c.rope_scaling.value("rope_type", c.rope_scaling.value("type", std::string("default")));
  const double factor = c.rope_scaling.value("factor", 1.0);
  if (type == "llama3") {
    const double low = c.rope_scaling.value("low_freq_factor", 1.0), high = c.rope_scaling.value("high_freq_factor", 4.0);
    // HF's default: the model's max_position_embeddings (standardize_rope_params).
    const double old_ctx = c.rope_scaling.value("original_max_position_embeddings", static_cast<double>(c.max_position_embeddings));
    const double low_wavelen = old_ctx / low, high_wavelen = old_ctx / high;
    const torch::Tensor wavelen = inv.reciprocal() * (2 * M_PI);
    const torch::Tensor scaled = torch::where(wavelen > low_wavelen, inv / factor, inv);
    const torch::Tensor smooth = (wavelen.reciprocal() * old_ctx - low) / (high - low);  // the band between the two
    const torch::Tensor smoothed = (1 - smooth) * scaled / factor + smooth * scaled;
    const torch::Tensor medium = (wavelen < high_wavelen).logical_not() * (wavelen > low_wavelen).logical_not();
    return torch::where(medium, smoothed, scaled);
  }
  if (type == "linear") return inv / factor;
  if (type == "yarn") {
    // Dimensions that turn fewer than beta_slow times over the original
    // context are interpolated (f / factor), those that turn more than
    // beta_fast times kept, and a linear ramp blends the band between.
    const double old_ctx = c.rope_scaling.value("original_max_position_embeddings", static_cast<double>(c.max_position_embeddings));
    const double fast = c.rope_scaling.value("beta_fast", 0.0) > 0 ? c.rope_scaling.value("beta_fast", 32.0) : 32.0;
    const double slow = c.rope_scaling.value("beta_slow", 0.0) > 0 ? c.rope_scaling.value("beta_slow", 1.0) : 1.0;
    const bool truncate = c.rope_scaling.value("truncate", true);
    const double d = static_cast<double>(dim);
    auto correction_dim = [&](double rotations) { return d * std::log(old_ctx / (rotations * 2 * M_PI)) / (2 * std::log(c.rope_theta)); };
    double lo = correction_dim(fast), hi = correction_dim(slow);
    if (truncate) lo = std::floor(lo), hi = std::ceil(hi);
    lo = std::max(lo, 0.0), hi = std::min(hi, d - 1);
    if (lo == hi) hi += 0.001;
    const torch::Tensor ramp = ((torch::arange(dim / 2, torch::kFloat32) - lo) / (hi - lo)).clamp(0, 1);
    const torch::Tensor keep = 1 - ramp;  // 1: extrapolate (unchanged)
    const torch::Tensor interpolated = (factor * pos_freqs).reciprocal();
    return interpolated * (1 - keep) + inv * keep;
  }
  if (type != "default") throw Error(AREAL_CODE_UNSUPPORTED, "rope_scaling type '" + type + "' is not implemented in the libtorch model yet");
  return inv;
}

// What cos and sin are multiplied by: YaRN's attention factor
// (0.1 ln(factor) + 1, or mscale / mscale_all_dim's, or given), else 1.
double rope_attention_factor(const model::ModelConfig& c) {
  if (!c.rope_scaling.is_object() || c.rope_scaling.value("rope_type", c.rope_scaling.value("type", std::string())) != "yarn") return 1.0;
  const double factor = c.rope_scaling.value("factor", 1.0);
  if (c.rope_scaling.contains("attention_factor") && c.rope_scaling["attention_factor"].is_number()) return c.rope_scaling["attention_factor"];
  auto mscale = [&](double m) { return factor <= 1 ? 1.0 : 0.1 * m * std::log(factor) + 1.0; };
  const double m = c.rope_scaling.value("mscale", 0.0), all = c.rope_scaling.value("mscale_all_dim", 0.0);
  return m != 0 && all != 0 ? mscale(m) / mscale(all) : mscale(1.0);
}

// Tokens up to which separate q and k are joined for one RoPE pass (finish_qkv).
constexpr int64_t kJoinedRopeMaxTokens = 256;

#if AREAL_HAS_SDPA
// Whether attention on these queries goes through the fused kernels.
bool fused_on(const torch::Tensor& q) { return q.is_cuda() && q.scalar_type() != torch::kFloat64; }
#endif

// The float32 log-prob head of a bfloat16/float16 model on CUDA, on TF32
// tensor cores: its inputs (hidden states, head weight) are bf16/fp16 values,
// which TF32's 10-bit mantissa holds exactly, so the products are exact and
// the sums float32, as in a plain float32 matmul, at tensor-core speed (on
// the 0.6B shape the head was a third of a training step). The backward's
// logit gradients are rounded to TF32, still finer than the bfloat16 the rest
// of the backward runs in. The switch is process-wide and is turned on, never
// back off: an engine and a trainer compute on their own threads in one
// process, and one turning it off while the other's head runs would change
// that head's kernel (and its bits, which the bitwise mode promises). A
// float32 CUDA model sharing a process with a bf16 one runs on TF32 too.
// Called only before a float32 product: where the bf16/fp16 -> float32
// product applies (libtorch >= 2.9) the forward reads the model's own
// operands, and a bf16 model never turns TF32 on, so other float32 products
// (LoRA's adapters) stay full float32, as PEFT's do.
void enable_tf32_head(const torch::Tensor& input, torch::ScalarType model_dtype) {
  if (input.is_cuda() && (model_dtype == torch::kBFloat16 || model_dtype == torch::kHalf) && !at::globalContext().allowTF32CuBLAS())
    at::globalContext().setAllowTF32CuBLAS(true);
}

}  // namespace

DecoderModel::DecoderModel(model::ModelConfig config, torch::Dtype dtype, torch::Device device)
    : config_(std::move(config)),
      dtype_(dtype),
      device_(device),
      inv_freq_(inverse_frequencies(config_).to(device)),
      rope_scale_(rope_attention_factor(config_)) {
  for (int64_t l = 0, n = 0; l < config_.num_hidden_layers; ++l) moe_index_.push_back(config_.is_moe_layer(l) ? n++ : -1);
}

DecoderModel::DecoderModel(model::ModelConfig config, torch::Dtype dtype, uint64_t seed, torch::Device device)
    : DecoderModel(std::move(config), dtype, device) {
  torch::manual_seed(seed);
  // Drawn on the CPU in float32/float64, then cast and moved.
  const torch::Dtype draw = dtype == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
  for (const auto& w : config_.weights()) {
    torch::Tensor t = w.init == model::WeightSpec::kOnes    ? torch::ones(w.shape, draw)
                      : w.init == model::WeightSpec::kZeros ? torch::zeros(w.shape, draw)
                                                            : torch::randn(w.shape, draw) * config_.initializer_range;
    params_[w.name] = t.to(device_, dtype_).set_requires_grad(true);
  }
}

void DecoderModel::join_projections() {
  torch::NoGradGuard no_grad;
  const size_t L = static_cast<size_t>(config_.num_hidden_layers);
  joined_qkv_.assign(L, {}), joined_qkv_bias_.assign(L, {}), joined_gate_up_.assign(L, {});
  // The joined matrix, and each part's parameter made a row view of it.
  auto join = [&](const std::vector<std::string>& names) {
    std::vector<torch::Tensor> parts;
    for (const auto& n : names) parts.push_back(p(n));
    torch::Tensor joined = torch::cat(parts, 0);
    for (int64_t i = 0, row = 0; i < static_cast<int64_t>(names.size()); row += parts[static_cast<size_t>(i)].size(0), ++i)
      params_[names[static_cast<size_t>(i)]] = joined.narrow(0, row, parts[static_cast<size_t>(i)].size(0));
    return joined;
  };
  for (size_t l = 0; l < L; ++l) {
    const std::string pre = "model.layers." + std::to_string(l) + ".";
    const std::string a = pre + "self_attn.";
    joined_qkv_[l] = join({a + "q_proj.weight", a + "k_proj.weight", a + "v_proj.weight"});
    if (config_.qkv_bias) joined_qkv_bias_[l] = join({a + "q_proj.bias", a + "k_proj.bias", a + "v_proj.bias"});
    if (moe_index_[l] < 0) joined_gate_up_[l] = join({pre + "mlp.gate_proj.weight", pre + "mlp.up_proj.weight"});
  }
}

void DecoderModel::keep_float32_head() {
  torch::NoGradGuard no_grad;
  if (dtype_ != torch::kBFloat16 && dtype_ != torch::kHalf) return;
  if (fused::float32_product_applies(device_, dtype_)) return;  // logits() reads the bf16 weight itself
  if (head32_.defined()) head32_.copy_(head_weight());  // in place: no second copy alive during a hand-off
  else head32_ = head_weight().to(torch::kFloat32);
}

void DecoderModel::use_decode_kernels(bool on) {
  decode_kernels_ = on && !invariant_ && fused::decode_kernels_apply(device_, dtype_, config_.head_dim);
}

const torch::Tensor& DecoderModel::p(const std::string& name) const {
  auto it = params_.find(name);
  if (it == params_.end()) throw Error(AREAL_CODE_INTERNAL, "no parameter " + name);
  return it->second;
}

std::vector<torch::Tensor> DecoderModel::parameters() const {
  std::vector<torch::Tensor> out;
  for (const auto& w : config_.weights()) out.push_back(params_.at(w.name));
  return out;
}

torch::Tensor DecoderModel::rms_norm(const torch::Tensor& x, const torch::Tensor& w) const {
  if (invariant_) return invariant::by_rows(x, [&](const torch::Tensor& rows) { return norm_rows(rows, w); });
  return norm_rows(x, w);
}

torch::Tensor DecoderModel::norm_rows(const torch::Tensor& x, const torch::Tensor& w) const {
#if AREAL_HAS_FUSED_RMS_NORM
  // On CUDA one kernel instead of eight (Qwen3 has four norms a layer, which
  // dominated the kernel count of a decode step): it reduces in float32 too,
  // and rounds the weighted result once where HF rounds before the weight.
  if (x.is_cuda() && x.scalar_type() != torch::kFloat64 && (!w.defined() || w.scalar_type() == x.scalar_type()))
    return std::get<0>(at::_fused_rms_norm(x, {x.size(-1)}, w.defined() ? std::optional<at::Tensor>(w) : std::nullopt, config_.rms_norm_eps));
#endif
  return portable_rms_norm(x, w, config_.rms_norm_eps);
}

torch::Tensor portable_rms_norm(const torch::Tensor& x, const torch::Tensor& w, double eps) {
  // In float32 at least, as HF's RMSNorm does, then back to the input dtype.
  const auto compute = x.scalar_type() == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
  const torch::Tensor xf = x.to(compute);
  const torch::Tensor var = xf.pow(2).mean(-1, /*keepdim=*/true);
  const torch::Tensor normalized = (xf * torch::rsqrt(var + eps)).to(x.scalar_type());
  return w.defined() ? w * normalized : normalized;
}

torch::Tensor halves_swapped(const torch::Tensor& x) {
  std::vector<int64_t> halves = x.sizes().vec();
  halves.back() = 2;
  halves.push_back(x.size(-1) / 2);
  return x.reshape(halves).flip(-2).reshape(x.sizes());
}

torch::Tensor DecoderModel::rope_table(const torch::Tensor& positions) const {
  const torch::Tensor at = upload(positions.to(torch::kInt64), device_);  // host positions: no wait for the device
  if (invariant_) {
    // The table ends at max_position_embeddings (a read past it would be a
    // device assert on CUDA): checked where the positions are, on the host
    // when the caller holds them there.
    const torch::Tensor& checked = positions.device().is_cpu() ? positions : at;
    if (checked.numel() > 0 && checked.max().item<int64_t>() >= invariant_rope_.size(1))
      throw Error(AREAL_CODE_INVALID_ARGUMENT, "batch_invariant: position " + std::to_string(checked.max().item<int64_t>()) +
                                                   " is past the model's max_position_embeddings " + std::to_string(invariant_rope_.size(1)));
    return invariant_rope_.index_select(1, at);
  }
  // freqs [S, hd/2] -> emb [S, hd] = cat(freqs, freqs), HF's layout; in float32 as HF computes it, then the model's dtype.
  // The sine's first half is negated (apply_rope's signed sine).
  const torch::Tensor freqs = at.to(torch::kFloat32).unsqueeze(1) * inv_freq_.unsqueeze(0);
  const torch::Tensor emb = torch::cat({freqs, freqs}, -1), sin = freqs.sin();
  torch::Tensor table = torch::stack({emb.cos(), torch::cat({-sin, sin}, -1)});
  if (rope_scale_ != 1.0) table = table * rope_scale_;  // YaRN's attention factor, on cos and sin as HF applies it
  return table.to(dtype_).unsqueeze(2);
}

torch::Tensor DecoderModel::apply_rope(const torch::Tensor& x, const torch::Tensor& rope) const {
  // HF's x * cos + rotate_half(x) * sin, rotate_half(x) = [-x2, x1], as
  // x * cos + [x2, x1] * [-sin, sin]: the halves swapped by one flip and the
  // sign carried by the table, three kernels where HF's form takes five.
  const torch::Tensor swapped = halves_swapped(x);
  // The invariant mode keeps one rounding an operation: addcmul's CPU vector
  // code rounds twice where its scalar tail may fuse (FMA).
  return invariant_ ? x * rope[0] + swapped * rope[1] : torch::addcmul(x * rope[0], swapped, rope[1]);
}

torch::Tensor DecoderModel::project(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b) const {
  auto f = [&](const torch::Tensor& rows) { return b.defined() ? torch::linear(rows, w, b) : torch::linear(rows, w); };
  return invariant_ ? invariant::by_rows(x, f) : f(x);
}

torch::Tensor DecoderModel::with_lora(int64_t layer, LoraModule m, const torch::Tensor& x, torch::Tensor y) const {
  auto delta = [&](const LoraAdapter& a, const torch::Tensor& rows) {
    if (!invariant_ || !a.a(layer, m).defined()) return a.delta(layer, m, rows);
    return invariant::by_rows(rows, [&](const torch::Tensor& chunk) { return a.delta(layer, m, chunk); });
  };
  if (!lora_rows_.empty()) {
    for (const auto& g : lora_rows_) {
      const torch::Tensor d = delta(*g.adapter, x.index_select(0, g.rows));
      if (d.defined()) y = y.index_add(0, g.rows, d);
    }
    return y;
  }
  if (!lora_) return y;
  const torch::Tensor d = delta(*lora_, x);
  return d.defined() ? y + d : y;
}

torch::Tensor DecoderModel::mlp(int64_t layer, const torch::Tensor& x, MoeRouting* routing) const {
  if (moe_index_[static_cast<size_t>(layer)] >= 0) return moe(layer, x, routing);
  const torch::Tensor act = gated(layer, x);
  return with_lora(layer, LoraModule::kDown, act, project(act, p("model.layers." + std::to_string(layer) + ".mlp.down_proj.weight")));
}

torch::Tensor DecoderModel::gated(int64_t layer, const torch::Tensor& x) const {
  const std::string pre = "model.layers." + std::to_string(layer) + ".mlp.";
  torch::Tensor gate_base, up_base;
  if (!invariant_ && static_cast<size_t>(layer) < joined_gate_up_.size()) {  // join_projections: one product
    const torch::Tensor both = torch::linear(x, joined_gate_up_[static_cast<size_t>(layer)]);
    const int64_t I = both.size(1) / 2;
    gate_base = both.narrow(1, 0, I), up_base = both.narrow(1, I, I);
  } else {
    gate_base = project(x, p(pre + "gate_proj.weight")), up_base = project(x, p(pre + "up_proj.weight"));
  }
  const torch::Tensor gate = with_lora(layer, LoraModule::kGate, x, gate_base);
  const torch::Tensor up = with_lora(layer, LoraModule::kUp, x, up_base);
  if (decode_kernels_ && !torch::GradMode::is_enabled())  // serving: one kernel where libtorch's take two
    if (torch::Tensor act = fused::silu_times_up(gate, up); act.defined()) return act;
  // silu's exp differs between libtorch's CPU vector code and its scalar
  // tails, which fall where a tensor's size puts them: fixed chunks in the
  // invariant mode (the product with up is one exact operation).
  return (invariant_ ? invariant::by_rows(gate, [](const torch::Tensor& g) { return torch::silu(g); }) : torch::silu(gate)) * up;
}

torch::Tensor DecoderModel::moe(int64_t layer, const torch::Tensor& x, MoeRouting* routing) const {
  const std::string pre = "model.layers." + std::to_string(layer) + ".mlp.";
  const int64_t T = x.size(0), E = config_.num_experts, k = config_.num_experts_per_tok;
  const bool oss = config_.fused_experts;
  // Qwen3-MoE's router (HF's Qwen3MoeTopKRouter): softmax over all experts
  // in float32 at least, top-k, optionally renormalised. GPT-OSS's
  // (GptOssTopKRouter): logits with a bias, top-k, softmax over those k.
  const torch::Tensor logits = oss ? torch::linear(x, p(pre + "router.weight"), p(pre + "router.bias")) : torch::linear(x, p(pre + "gate.weight"));
  const auto compute = x.scalar_type() == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
  const torch::Tensor scores = oss ? logits.to(compute) : torch::softmax(logits.to(compute), -1);  // monotonic in the logits
  torch::Tensor weights, experts;
  if (routing != nullptr && routing->replay.defined()) {
    // Replay: the recorded experts, weighted by today's router.
    experts = routing->replay.select(1, moe_index_[static_cast<size_t>(layer)]).to(x.device(), torch::kInt64);
    if (experts.size(0) != T || experts.size(1) != k)
      throw Error(AREAL_CODE_INVALID_ARGUMENT, "routing replay has " + std::to_string(experts.size(0)) + " x " + std::to_string(experts.size(1)) +
                                                   " experts for a layer of " + std::to_string(T) + " tokens x top-" + std::to_string(k));
    // A row whose first slot is negative was not recorded: the router chooses
    // it. Selected on the device, without asking the host whether any is.
    experts = torch::where(experts.select(1, 0).lt(0).unsqueeze(1), std::get<1>(scores.topk(k, -1)), experts);
    weights = scores.gather(1, experts);
  } else {
    std::tie(weights, experts) = scores.topk(k, -1);
  }
  if (oss) weights = torch::softmax(weights, -1);
  else if (config_.norm_topk_prob) weights = weights / weights.sum(-1, /*keepdim=*/true);
  weights = weights.to(x.scalar_type());
  if (routing != nullptr) {
    if (routing->record) routing->chosen.push_back(experts.detach());
    if (routing->keep_logits) routing->logits.push_back(logits);
  }
  // Each (token, slot) pair sorted by expert, so every expert runs once on
  // its rows; the outputs are summed back per token.
  const torch::Tensor flat = experts.reshape(-1);
  const torch::Tensor order = flat.argsort();
  const torch::Tensor token_of = order.div(k, "floor");
  const torch::Tensor rows = x.index_select(0, token_of);
  const torch::Tensor row_weights = weights.reshape(-1).index_select(0, order).unsqueeze(1);
  const torch::Tensor counts = torch::bincount(flat, {}, E).to(torch::kCPU);
  const auto* count = counts.data_ptr<int64_t>();
  std::vector<torch::Tensor> outs;
  for (int64_t e = 0, start = 0; e < E; start += count[e], ++e) {
    if (count[e] == 0) continue;
    const torch::Tensor in = rows.narrow(0, start, count[e]);
    torch::Tensor out;
    if (oss) {
      // GPT-OSS's expert (GptOssExperts): fused, biased, gate and up
      // interleaved along 2I, a clamped SwiGLU with up + 1.
      const torch::Tensor gate_up = torch::addmm(p(pre + "experts.gate_up_proj_bias")[e], in, p(pre + "experts.gate_up_proj")[e]);
      const torch::Tensor gate = gate_up.slice(1, 0, c10::nullopt, 2).clamp_max(config_.swiglu_limit);
      const torch::Tensor up = gate_up.slice(1, 1, c10::nullopt, 2).clamp(-config_.swiglu_limit, config_.swiglu_limit);
      const torch::Tensor act = (up + 1) * (gate * torch::sigmoid(gate * config_.swiglu_alpha));
      out = torch::addmm(p(pre + "experts.down_proj_bias")[e], act, p(pre + "experts.down_proj")[e]);
    } else {
      const std::string xp = pre + "experts." + std::to_string(e) + ".";
      const torch::Tensor act = torch::silu(torch::linear(in, p(xp + "gate_proj.weight"))) * torch::linear(in, p(xp + "up_proj.weight"));
      out = torch::linear(act, p(xp + "down_proj.weight"));
    }
    outs.push_back(out * row_weights.narrow(0, start, count[e]));
  }
  return torch::zeros_like(x).index_add(0, token_of, torch::cat(outs));
}

torch::Tensor load_balancing_loss(const std::vector<torch::Tensor>& router_logits, int64_t num_experts, int64_t top_k) {
  if (router_logits.empty()) throw Error(AREAL_CODE_INTERNAL, "load_balancing_loss without router logits");
  // As transformers' load_balancing_loss_func: every layer's rows together.
  const torch::Tensor all = torch::cat(router_logits, 0);
  const auto compute = all.scalar_type() == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
  const torch::Tensor probs = torch::softmax(all, -1).to(compute);
  const torch::Tensor chosen = std::get<1>(probs.topk(top_k, -1));
  const double rows = static_cast<double>(all.size(0));
  const torch::Tensor fraction = torch::bincount(chosen.reshape(-1), {}, num_experts).to(compute) / rows;  // sums to k
  const torch::Tensor mean_prob = probs.sum(0) / rows;
  return (fraction * mean_prob).sum() * static_cast<double>(num_experts);
}

DecoderModel::QkvProjection DecoderModel::project_qkv(int64_t layer, const torch::Tensor& x) const {
  const std::string pre = "model.layers." + std::to_string(layer) + ".self_attn.";
  const int64_t S = x.size(0), hd = config_.head_dim;
  const int64_t H = config_.num_attention_heads, kv = config_.num_key_value_heads;
  QkvProjection r;  // join_projections: q, k and v from one product, as column ranges of it
  if (!invariant_ && static_cast<size_t>(layer) < joined_qkv_.size()) {
    const auto l = static_cast<size_t>(layer);
    r.joined = joined_qkv_bias_[l].defined() ? torch::linear(x, joined_qkv_[l], joined_qkv_bias_[l]) : torch::linear(x, joined_qkv_[l]);
  }
  auto proj = [&](LoraModule m, int64_t first_head, int64_t heads) {
    const std::string base = pre + lora_module_name(m);
    torch::Tensor y = r.joined.defined() ? r.joined.narrow(1, first_head * hd, heads * hd)
                                         : project(x, p(base + ".weight"), config_.qkv_bias ? p(base + ".bias") : torch::Tensor());
    return with_lora(layer, m, x, y).view({S, heads, hd});
  };
  r.q = proj(LoraModule::kQ, 0, H);
  r.k = proj(LoraModule::kK, H, kv);
  r.v = proj(LoraModule::kV, H + kv, kv);
  r.qk_in_place = r.joined.defined() && r.q.data_ptr() == r.joined.data_ptr() &&
                  r.k.data_ptr() == static_cast<const char*>(r.joined.data_ptr()) + H * hd * r.joined.element_size();
  return r;
}

void DecoderModel::qkv(int64_t layer, const torch::Tensor& x, const torch::Tensor& rope, torch::Tensor& q, torch::Tensor& k,
                       torch::Tensor& v) const {
  const QkvProjection projected = project_qkv(layer, x);
  finish_qkv(layer, projected, rope, q, k);
  v = projected.v;
}

void DecoderModel::finish_qkv(int64_t layer, const QkvProjection& projected, const torch::Tensor& rope, torch::Tensor& q, torch::Tensor& k) const {
  const std::string pre = "model.layers." + std::to_string(layer) + ".self_attn.";
  const int64_t S = projected.q.size(0), hd = config_.head_dim;
  const int64_t H = config_.num_attention_heads, kv = config_.num_key_value_heads;
  const torch::Tensor& joined = projected.joined;
  q = projected.q, k = projected.k;
  // q's and k's heads side by side in the joined product (serving, no
  // adapter on q or k): RoPE, and Qwen3's norms, can run on them in place.
  torch::Tensor qk_heads;  // [S, H + kv, hd] when in place
  if (config_.qk_norm && projected.qk_in_place) {
    // Qwen3 serving: every head of the product normalized by one call (v's
    // too, unused), then q's and k's scaled by their weights in place (HF's
    // order: rounded before the weight), where each norm first copied its
    // strided heads and a copy joined them after: three kernels a layer
    // where five ran, which a small decode step's time follows.
    const torch::Tensor normalized = rms_norm(joined.view({S, H + 2 * kv, hd}), torch::Tensor());
    normalized.narrow(1, 0, H).mul_(p(pre + "q_norm.weight"));
    normalized.narrow(1, H, kv).mul_(p(pre + "k_norm.weight"));
    qk_heads = normalized.narrow(1, 0, H + kv);
  } else if (config_.qk_norm) {  // Qwen3: RMSNorm over each head before RoPE
    q = rms_norm(q, p(pre + "q_norm.weight"));
    k = rms_norm(k, p(pre + "k_norm.weight"));
  } else if (projected.qk_in_place) {
    qk_heads = joined.narrow(1, 0, (H + kv) * hd).view({S, H + kv, hd});
  }
  if (invariant_) {  // the bitwise mode keeps its own kernel shapes
    q = apply_rope(q, rope);
    k = apply_rope(k, rope);
    return;
  }
  // RoPE once over q and k side by side: a small decode step is bound by its
  // kernel count, and this takes three kernels a layer away. Where q and k
  // are separate tensors (the trainer's separate products, an adapter's q or
  // k), joining them costs a copy, and under autograd each slice's backward
  // fills a zero tensor of both: past a few hundred tokens (a training
  // micro-batch, a prefill) bytes cost more than kernels, so each takes its
  // own. The choice follows the token count alone, so a training forward and
  // its no-grad recompute of the same micro-batch round alike.
  if (!qk_heads.defined() && S > kJoinedRopeMaxTokens) {
    q = apply_rope(q, rope);
    k = apply_rope(k, rope);
    return;
  }
  const torch::Tensor qk = apply_rope(qk_heads.defined() ? qk_heads : torch::cat({q, k}, 1), rope);
  q = qk.narrow(1, 0, H);
  k = qk.narrow(1, H, kv);
}

torch::Tensor DecoderModel::queries_caching_keys(int64_t layer, const torch::Tensor& x, const torch::Tensor& rope, const torch::Tensor& k_cache,
                                                 const torch::Tensor& v_cache, const torch::Tensor& slots, const torch::Tensor& positions) const {
  const std::string pre = "model.layers." + std::to_string(layer) + ".";
  const QkvProjection projected = project_qkv(layer, rms_norm(x, p(pre + "input_layernorm.weight")));
  if (decode_kernels_ && projected.qk_in_place) {
    // Norms, RoPE and both cache writes in one kernel (Qwen3: eight fewer a layer).
    const int64_t S = x.size(0), H = config_.num_attention_heads, kv = config_.num_key_value_heads, hd = config_.head_dim;
    const torch::Tensor qk = projected.joined.narrow(1, 0, (H + kv) * hd).view({S, H + kv, hd});
    const bool norm = config_.qk_norm;
    const torch::Tensor q = fused::heads_into_cache(qk, projected.v, norm ? p(pre + "self_attn.q_norm.weight") : torch::Tensor(),
                                                    norm ? p(pre + "self_attn.k_norm.weight") : torch::Tensor(), config_.rms_norm_eps, rope, k_cache,
                                                    v_cache, slots, positions);
    if (q.defined()) return q;
  }
  torch::Tensor q, k;
  finish_qkv(layer, projected, rope, q, k);
  k_cache.index_put_({slots, positions}, k);
  v_cache.index_put_({slots, positions}, projected.v);
  return q;
}

bool DecoderModel::plain_attention(int64_t layer) const { return !config_.attention_sinks && config_.attention_window(layer) == 0; }

torch::Tensor DecoderModel::attention_probs(int64_t layer, const torch::Tensor& scores, std::vector<int64_t> sink_view, torch::ScalarType out) const {
  const auto compute = scores.scalar_type() == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
  const torch::Tensor s = scores.to(compute);
  if (!config_.attention_sinks) return torch::softmax(s, -1).to(out);
  // HF's eager GPT-OSS attention: the sink is one more column of every row,
  // softmaxed with the keys and dropped after (the weights sum below 1).
  std::vector<int64_t> column = s.sizes().vec();
  column.back() = 1;
  const torch::Tensor sink = p("model.layers." + std::to_string(layer) + ".self_attn.sinks").to(compute).view(sink_view).expand(column);
  return torch::softmax(torch::cat({s, sink}, -1), -1).narrow(-1, 0, s.size(-1)).to(out);
}

torch::Tensor DecoderModel::attend_heads(int64_t layer, const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, int64_t q_offset) const {
  const int64_t S = q.size(0), K = k.size(0), groups = config_.num_attention_heads / config_.num_key_value_heads;
  const int64_t window = config_.attention_window(layer);
  torch::Tensor kr, vr;  // K and V repeated for each query head (GQA), made below the native-GQA path
  // Queries [begin, end) attend to keys 0..q_offset + end - 1 (causal), the
  // last `window` of them in a sliding layer: [H, n, keys] scores.
  auto block = [&](int64_t begin, int64_t end) {
    const int64_t keys = std::min(K, q_offset + end);
    const torch::Tensor qb = q.narrow(0, begin, end - begin), kb = kr.narrow(0, 0, keys), vb = vr.narrow(0, 0, keys);
    torch::Tensor scores = torch::matmul(qb.transpose(0, 1), kb.permute({1, 2, 0})) / std::sqrt(static_cast<double>(config_.head_dim));
    const auto idx = torch::TensorOptions().dtype(torch::kInt64).device(q.device());
    const torch::Tensor qi = torch::arange(begin, end, idx).unsqueeze(1) + q_offset, ki = torch::arange(keys, idx).unsqueeze(0);
    torch::Tensor hidden = ki > qi;
    if (window > 0) hidden = hidden | (ki <= qi - window);
    scores = scores.masked_fill(hidden.unsqueeze(0), -std::numeric_limits<double>::infinity());
    const torch::Tensor probs = attention_probs(layer, scores, {config_.num_attention_heads, 1, 1}, q.scalar_type());
    return torch::matmul(probs, vb.transpose(0, 1)).transpose(0, 1).reshape({end - begin, -1});
  };
#if AREAL_HAS_SDPA_GQA
  if (fused_on(q) && plain_attention(layer) && S == K && q_offset == 0) {
    // Causal self-attention (training, prefill) on the flash kernel, whose
    // grouped-query support reads each KV head for its query heads: no
    // repeated copy of K and V, forward or backward.
    const torch::Tensor o = torch::scaled_dot_product_attention(q.transpose(0, 1).unsqueeze(0), k.transpose(0, 1).unsqueeze(0),
                                                                v.transpose(0, 1).unsqueeze(0), {}, 0.0, /*is_causal=*/true,
                                                                std::nullopt, /*enable_gqa=*/true);
    return o.squeeze(0).transpose(0, 1).reshape({S, -1});
  }
#endif
  kr = k.repeat_interleave(groups, 1), vr = v.repeat_interleave(groups, 1);
#if AREAL_HAS_SDPA
  if (fused_on(q) && plain_attention(layer)) {
    // [1, H, S, hd] layout for the fused kernels (flash / memory-efficient on CUDA).
    const torch::Tensor q4 = q.transpose(0, 1).unsqueeze(0), k4 = kr.transpose(0, 1).unsqueeze(0), v4 = vr.transpose(0, 1).unsqueeze(0);
    torch::Tensor o;
    if (S == K && q_offset == 0) {
      o = torch::scaled_dot_product_attention(q4, k4, v4, {}, 0.0, /*is_causal=*/true);
    } else if (S == 1 && q_offset + 1 == K) {
      o = torch::scaled_dot_product_attention(q4, k4, v4);  // one new token sees every cached key
    } else {
      const auto idx = torch::TensorOptions().dtype(torch::kInt64).device(q.device());
      const torch::Tensor allowed = torch::arange(K, idx).unsqueeze(0) <= (torch::arange(S, idx).unsqueeze(1) + q_offset);
      o = torch::scaled_dot_product_attention(q4, k4, v4, allowed);
    }
    return o.squeeze(0).transpose(0, 1).reshape({S, -1});
  }
#endif
  // Long prompts (agents send 10-30k tokens) go in query blocks so the
  // score matrix stays near kMaxScores elements instead of H*S*K.
  constexpr int64_t kMaxScores = int64_t{1} << 25;
  const int64_t rows = std::max<int64_t>(1, kMaxScores / std::max<int64_t>(1, config_.num_attention_heads * K));
  torch::Tensor out;
  if (rows >= S) {
    out = block(0, S);
  } else {
    std::vector<torch::Tensor> parts;
    for (int64_t b = 0; b < S; b += rows) parts.push_back(block(b, std::min(S, b + rows)));
    out = torch::cat(parts, 0);
  }
  return out;
}

torch::Tensor DecoderModel::o_proj(int64_t layer, const torch::Tensor& heads) const {
  const std::string pre = "model.layers." + std::to_string(layer) + ".self_attn.o_proj.";
  return with_lora(layer, LoraModule::kO, heads, project(heads, p(pre + "weight"), config_.o_bias ? p(pre + "bias") : torch::Tensor()));
}

bool DecoderModel::adds_into_products(const torch::Tensor& x) const { return !invariant_ && !torch::GradMode::is_enabled() && x.dim() == 2; }

torch::Tensor DecoderModel::add_attention_output(int64_t layer, torch::Tensor x, const torch::Tensor& heads) const {
  if (!adds_into_products(x)) return x + o_proj(layer, heads);
  const std::string pre = "model.layers." + std::to_string(layer) + ".self_attn.o_proj.";
  x.addmm_(heads, p(pre + "weight").t());
  if (config_.o_bias) x.add_(p(pre + "bias"));
  return with_lora(layer, LoraModule::kO, heads, x);  // the adapter's term depends on the heads alone
}

torch::Tensor DecoderModel::add_mlp_output(int64_t layer, torch::Tensor x, MoeRouting* routing) const {
  const std::string pre = "model.layers." + std::to_string(layer) + ".";
  const torch::Tensor h = rms_norm(x, p(pre + "post_attention_layernorm.weight"));
  if (!adds_into_products(x) || moe_index_[static_cast<size_t>(layer)] >= 0) return x + mlp(layer, h, routing);
  const torch::Tensor act = gated(layer, h);
  x.addmm_(act, p(pre + "mlp.down_proj.weight").t());
  return with_lora(layer, LoraModule::kDown, act, x);
}

torch::Tensor DecoderModel::attend(int64_t layer, const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, int64_t q_offset) const {
  return o_proj(layer, attend_heads(layer, q, k, v, q_offset));
}

torch::Tensor DecoderModel::attend_packed(int64_t layer, const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                          const std::vector<int64_t>& bounds) const {
  return o_proj(layer, attend_packed_heads(layer, q, k, v, bounds));
}

torch::Tensor DecoderModel::varlen_offsets(const std::vector<int64_t>& bounds) const {
  if (!fused::varlen_attention_applies(device_, dtype_, config_.head_dim)) return {};
  const std::vector<int32_t> offsets = fused::nonempty_offsets(bounds);
  if (offsets.size() < 3) return {};  // one sequence: the plain causal call
  return upload(torch::tensor(offsets, torch::kInt32), device_);
}

torch::Tensor DecoderModel::attend_packed_heads(int64_t layer, const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                                const std::vector<int64_t>& bounds, const torch::Tensor& offsets) const {
  const int64_t B = static_cast<int64_t>(bounds.size()) - 1, T = q.size(0);
  if (B == 1) return attend_heads(layer, q, k, v, 0);
  auto len = [&](int64_t b) { return bounds[b + 1] - bounds[b]; };
  // One flash call over every sequence, unpadded, in the packed layout
  // itself, where it serves (offsets defined): no per-sequence calls, no
  // gather into groups and back.
  torch::Tensor cu;
  if (plain_attention(layer)) cu = offsets.defined() ? offsets : varlen_offsets(bounds);
  if (cu.defined()) {
    int64_t longest = 0;
    for (int64_t b = 0; b < B; ++b) longest = std::max(longest, len(b));
    if (const torch::Tensor o = fused::varlen_causal_attention(q, k, v, cu, longest); o.defined()) return o.reshape({T, -1});
  }
  // Longest first; sequences longer than kAlone keep a call each (their
  // attention dominates; no padding); shorter ones go in groups of similar
  // length, each group padded to its longest and attended at once.
  constexpr int64_t kAlone = 256;
  constexpr int64_t kMaxScores = int64_t{1} << 25;
  std::vector<int64_t> order(static_cast<size_t>(B));
  std::iota(order.begin(), order.end(), int64_t{0});
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return len(a) > len(b); });
  const auto idx = torch::TensorOptions().dtype(torch::kInt64);
  std::vector<torch::Tensor> pieces;  // pre-projection outputs, rows in `order`, padded rows included
  std::vector<int64_t> row_of(static_cast<size_t>(T));  // packed token -> its row in cat(pieces)
  int64_t rows = 0;
  for (size_t i = 0; i < order.size() && len(order[i]) > 0;) {
    const int64_t first = order[i], L = len(first);
    if (L > kAlone) {
      const int64_t s = bounds[first];
      pieces.push_back(attend_heads(layer, q.narrow(0, s, L), k.narrow(0, s, L), v.narrow(0, s, L), 0));
      for (int64_t r = 0; r < L; ++r) row_of[static_cast<size_t>(s + r)] = rows + r;
      rows += L;
      ++i;
      continue;
    }
    // Grow the group while its padded attention costs at most twice the
    // sequences' own (sum of squared lengths) and its scores stay bounded.
    size_t j = i + 1;
    double own = static_cast<double>(L) * L;
    for (; j < order.size() && len(order[j]) > 0; ++j) {
      const double next = own + static_cast<double>(len(order[j])) * len(order[j]);
      const auto G = static_cast<double>(j - i + 1);
      if (G * L * L > 2 * next + 64 * L || G * config_.num_attention_heads * L * L > kMaxScores) break;
      own = next;
    }
    const int64_t G = static_cast<int64_t>(j - i);
    // Padded positions repeat the sequence's last token: causal masking
    // keeps them out of every real query, and their outputs are dropped.
    std::vector<int64_t> gather(static_cast<size_t>(G * L));
    for (int64_t g = 0; g < G; ++g) {
      const int64_t b = order[i + static_cast<size_t>(g)], s = bounds[b], n = len(b);
      for (int64_t r = 0; r < L; ++r) gather[static_cast<size_t>(g * L + r)] = s + std::min(r, n - 1);
      for (int64_t r = 0; r < n; ++r) row_of[static_cast<size_t>(s + r)] = rows + g * L + r;
    }
    const torch::Tensor at = upload(torch::tensor(gather, idx), q.device());
    auto padded = [&](const torch::Tensor& x) { return x.index_select(0, at).view({G, L, x.size(1), x.size(2)}); };
    pieces.push_back(attend_padded(layer, padded(q), padded(k), padded(v)).reshape({G * L, -1}));
    rows += G * L;
    i = j;
  }
  return torch::cat(pieces, 0).index_select(0, upload(torch::tensor(row_of, idx), q.device()));
}

torch::Tensor DecoderModel::attend_padded(int64_t layer, const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) const {
  const int64_t G = q.size(0), L = q.size(1), groups = config_.num_attention_heads / config_.num_key_value_heads;
  [[maybe_unused]] const bool plain = plain_attention(layer);  // read by the fused paths (libtorch 2)
  // [G, heads, L, hd] for the batched kernels.
  const torch::Tensor q4 = q.permute({0, 2, 1, 3});
#if AREAL_HAS_SDPA_GQA
  if (fused_on(q) && plain)
    return torch::scaled_dot_product_attention(q4, k.permute({0, 2, 1, 3}), v.permute({0, 2, 1, 3}), {}, 0.0, /*is_causal=*/true,
                                               std::nullopt, /*enable_gqa=*/true)
        .permute({0, 2, 1, 3})
        .reshape({G, L, -1});
#endif
  const torch::Tensor k4 = k.repeat_interleave(groups, 2).permute({0, 2, 1, 3}), v4 = v.repeat_interleave(groups, 2).permute({0, 2, 1, 3});
#if AREAL_HAS_SDPA
  if (fused_on(q) && plain)
    return torch::scaled_dot_product_attention(q4, k4, v4, {}, 0.0, /*is_causal=*/true).permute({0, 2, 1, 3}).reshape({G, L, -1});
#endif
  torch::Tensor scores = torch::matmul(q4, k4.transpose(2, 3)) / std::sqrt(static_cast<double>(config_.head_dim));
  const auto idx = torch::TensorOptions().dtype(torch::kInt64).device(q.device());
  const torch::Tensor key = torch::arange(L, idx).unsqueeze(0), query = torch::arange(L, idx).unsqueeze(1);
  torch::Tensor hidden = key > query;  // [query, key]
  if (const int64_t window = config_.attention_window(layer); window > 0) hidden = hidden | (key <= query - window);
  scores = scores.masked_fill(hidden, -std::numeric_limits<double>::infinity());
  const torch::Tensor probs = attention_probs(layer, scores, {1, config_.num_attention_heads, 1, 1}, q.scalar_type());
  return torch::matmul(probs, v4).permute({0, 2, 1, 3}).reshape({G, L, -1});
}

torch::Tensor DecoderModel::attend_masked(int64_t layer, const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                          const torch::Tensor& allowed) const {
  const int64_t G = q.size(0), L = q.size(1), groups = config_.num_attention_heads / config_.num_key_value_heads;
  [[maybe_unused]] const bool plain = plain_attention(layer);  // read by the fused paths (libtorch 2)
  const torch::Tensor q4 = q.permute({0, 2, 1, 3}), mask = allowed.unsqueeze(1);  // [G, heads, Lq, hd], [G, 1, Lq, Lk]
#if AREAL_HAS_SDPA_GQA
  if (fused_on(q) && plain)
    return torch::scaled_dot_product_attention(q4, k.permute({0, 2, 1, 3}), v.permute({0, 2, 1, 3}), mask, 0.0, false, std::nullopt, /*enable_gqa=*/true)
        .permute({0, 2, 1, 3})
        .reshape({G, L, -1});
#endif
  const torch::Tensor k4 = k.repeat_interleave(groups, 2).permute({0, 2, 1, 3}), v4 = v.repeat_interleave(groups, 2).permute({0, 2, 1, 3});
#if AREAL_HAS_SDPA
  if (fused_on(q) && plain) return torch::scaled_dot_product_attention(q4, k4, v4, mask).permute({0, 2, 1, 3}).reshape({G, L, -1});
#endif
  torch::Tensor scores = torch::matmul(q4, k4.transpose(2, 3)) / std::sqrt(static_cast<double>(config_.head_dim));
  scores = scores.masked_fill(mask.logical_not(), -std::numeric_limits<double>::infinity());
  const torch::Tensor probs = attention_probs(layer, scores, {1, config_.num_attention_heads, 1, 1}, q.scalar_type());
  return torch::matmul(probs, v4).permute({0, 2, 1, 3}).reshape({G, L, -1});
}

bool DecoderModel::flash_cached(int64_t layer) const {
  return !invariant_ && plain_attention(layer) && fused::cached_attention_applies(device_, dtype_, config_.head_dim);
}

torch::Tensor DecoderModel::attend_cached_chunks(int64_t layer, const torch::Tensor& q, const torch::Tensor& k_cache, const torch::Tensor& v_cache,
                                                 const CachedKeys& keys, int64_t longest_query) const {
  if (!flash_cached(layer)) return {};
  const torch::Tensor o = fused::cached_attention(q, k_cache, v_cache, keys.counts, keys.cu_queries, keys.cu_keys, longest_query);
  return o.defined() ? o.reshape({q.size(0), -1}) : o;
}

torch::Tensor DecoderModel::attend_cached_heads(int64_t layer, const torch::Tensor& q, const torch::Tensor& k_cache, const torch::Tensor& v_cache,
                                               const CachedKeys& keys) const {
  const int64_t B = q.size(0), kv = k_cache.size(2), hd = config_.head_dim;
  if (flash_cached(layer))
    if (const torch::Tensor o = fused::cached_attention(q, k_cache, v_cache, keys.counts, keys.cu_queries, keys.cu_keys, 1); o.defined())
      return o.reshape({B, -1});
  const torch::Tensor& allowed = config_.attention_window(layer) > 0 ? keys.allowed_sliding : keys.allowed;
  if (!allowed.defined()) throw Error(AREAL_CODE_INTERNAL, "decode attention: the flash kernel did not serve and the step has no key mask");
  // [B, kv, width, hd] views of the cache's first rows.
  const torch::Tensor k = k_cache.narrow(0, 0, B).narrow(1, 0, keys.width).transpose(1, 2);
  const torch::Tensor v = v_cache.narrow(0, 0, B).narrow(1, 0, keys.width).transpose(1, 2);
  const int64_t groups = config_.num_attention_heads / config_.num_key_value_heads;
  // GQA without copying the cache: each row's `groups` query heads that
  // share a KV head are that head's query rows ([B, kv, groups, hd]); the
  // cache is read in place (HF's head h uses KV head h / groups).
  const torch::Tensor q4 = q.reshape({B, kv, groups, hd});
  torch::Tensor o;
#if AREAL_HAS_SDPA
  if (fused_on(q) && !config_.attention_sinks) o = torch::scaled_dot_product_attention(q4, k, v, allowed);  // a window is in the mask
#endif
  if (!o.defined()) {
    torch::Tensor scores = torch::matmul(q4, k.transpose(-1, -2)) / std::sqrt(static_cast<double>(hd));
    if (allowed.scalar_type() == torch::kBool) scores = scores.masked_fill(allowed.logical_not(), -std::numeric_limits<double>::infinity());
    else scores = scores + allowed.to(scores.scalar_type());
    o = torch::matmul(attention_probs(layer, scores, {1, kv, groups, 1}, q.scalar_type()), v);
  }
  return o.reshape({B, -1});
}

torch::Tensor DecoderModel::layer_forward(int64_t layer, const torch::Tensor& x, const torch::Tensor& rope, const AttentionLayout& layout,
                                          MoeRouting* routing) const {
  const std::string pre = "model.layers." + std::to_string(layer) + ".";
  const torch::Tensor h = rms_norm(x, p(pre + "input_layernorm.weight"));
  torch::Tensor q, k, v;
  qkv(layer, h, rope, q, k, v);
  // Attention never crosses sequence boundaries of the packed batch, nor
  // leaves a token's path in a tree.
  torch::Tensor attended;
  if (layout.invariant) {  // keys by row of the forward's own k and v
    const torch::Tensor& table = layout.invariant_keys;
    attended = o_proj(layer, attend_invariant_heads(q, *layout.invariant, [&](const torch::Tensor& paths, int64_t block) {
                        const auto& sh = layout.invariant->shape;
                        const torch::Tensor rows = invariant::block_rows(table, paths, block, sh.key_block);
                        const std::vector<int64_t> shape = {sh.units_per_call, sh.key_block, k.size(1), k.size(2)};
                        return std::make_pair(k.index_select(0, rows).view(shape), v.index_select(0, rows).view(shape));
                      }));
  } else {
    attended = layout.tree() ? attend_tree(layer, q, k, v, layout) : o_proj(layer, attend_packed_heads(layer, q, k, v, layout.bounds, layout.offsets));
  }
  const torch::Tensor x2 = x + attended;
  return x2 + mlp(layer, rms_norm(x2, p(pre + "post_attention_layernorm.weight")), routing);
}

torch::Tensor DecoderModel::hidden(const torch::Tensor& ids, const torch::Tensor& cu_seqlens, bool checkpoint, MoeRouting* routing) const {
  if (ids.dim() != 1 || cu_seqlens.dim() != 1 || cu_seqlens.size(0) < 2)
    throw Error(AREAL_CODE_INVALID_ARGUMENT, "input_ids must be [T] and cu_seqlens [B+1]");
  // Sequence bounds are read on the host; the tokens go to the model's device.
  const torch::Tensor cu = cu_seqlens.to(torch::kCPU, torch::kInt64).contiguous();
  const auto* bounds = cu.data_ptr<int64_t>();
  if (bounds[0] != 0 || bounds[cu.size(0) - 1] != ids.size(0))
    throw Error(AREAL_CODE_INVALID_ARGUMENT, "cu_seqlens must start at 0 and end at len(input_ids)");
  const int64_t max_id = ids.numel() ? ids.max().item<int64_t>() : 0;
  if (ids.numel() && (ids.min().item<int64_t>() < 0 || max_id >= config_.vocab_size))
    throw Error(AREAL_CODE_INVALID_ARGUMENT, "token id " + std::to_string(max_id) + " is outside the vocabulary of " + std::to_string(config_.vocab_size));
  std::vector<int64_t> pos(static_cast<size_t>(ids.size(0)));
  for (int64_t b = 0; b + 1 < cu.size(0); ++b) {
    if (bounds[b + 1] < bounds[b]) throw Error(AREAL_CODE_INVALID_ARGUMENT, "cu_seqlens must not decrease");
    for (int64_t t = bounds[b]; t < bounds[b + 1]; ++t) pos[t] = t - bounds[b];
  }
  auto layout = c10::make_intrusive<AttentionLayout>();
  layout->bounds.assign(bounds, bounds + cu.size(0));
  if (!invariant_) {
    layout->offsets = varlen_offsets(layout->bounds);  // once for every layer
  } else {  // a path a sequence: its own rows
    std::vector<invariant::Unit> units;
    std::vector<std::vector<int64_t>> paths;
    for (int64_t b = 0; b + 1 < cu.size(0); ++b) {
      if (bounds[b + 1] == bounds[b]) continue;
      invariant::add_units(units, invariant::shape(device_), static_cast<int64_t>(paths.size()), bounds[b], bounds[b + 1] - bounds[b], 0);
      paths.emplace_back();
      for (int64_t t = bounds[b]; t < bounds[b + 1]; ++t) paths.back().push_back(t);
    }
    layout->invariant = invariant::plan_attention(ids.size(0), std::move(units), device_);
    if (!paths.empty()) layout->invariant_keys = invariant::path_table(paths, device_);
  }
  const torch::Tensor rope = rope_table(torch::tensor(pos, torch::kInt64));  // once for every layer
  return run_layers(torch::embedding(p("model.embed_tokens.weight"), upload(ids.to(torch::kInt64), device_)), rope, layout, checkpoint, routing);
}

// One decoder layer recomputed in backward instead of stored: it keeps only
// its input (and, for a MoE layer, the experts it chose, so the recompute
// routes the same). A MoE layer's router logits are a second output, so a
// loss on them (load balancing) reaches the router through the recompute too.
// A layer whose LoRA adapter draws dropout masks also keeps the generator's
// state from before its forward, and the recompute draws from that state:
// the same masks, as PyTorch's checkpoint (preserve_rng_state) has it.
// Gradients go to whatever of the layer requires them: its weights, or with
// the base frozen (LoRA) the adapter's A and B.
struct CheckpointedLayer : torch::autograd::Function<CheckpointedLayer> {
  static torch::autograd::tensor_list forward(torch::autograd::AutogradContext* ctx, torch::Tensor in, const DecoderModel* m, int64_t layer,
                                              torch::Tensor rope, c10::intrusive_ptr<AttentionLayout> layout, torch::Tensor replay) {
    ctx->saved_data["m"] = reinterpret_cast<int64_t>(m);
    ctx->saved_data["layer"] = layer;
    ctx->saved_data["layout"] = c10::IValue::make_capsule(layout);
    if (m->lora() != nullptr && m->lora()->draws_random()) ctx->saved_data["generator_state"] = default_generator_state(in.device());
    torch::NoGradGuard no_grad;
    MoeRouting r;
    if (replay.numel() > 0) r.replay = replay;  // empty: the router chooses (custom functions take no undefined tensors)
    r.record = r.keep_logits = true;
    torch::Tensor out = m->layer_forward(layer, in, rope, *layout, &r);
    const bool moe = !r.chosen.empty();
    ctx->save_for_backward({in, rope, moe ? r.chosen[0] : torch::empty({0}, torch::kInt64)});
    if (!moe) return {out};
    ctx->mark_non_differentiable({r.chosen[0]});
    return {out, r.logits[0], r.chosen[0]};
  }
  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx, torch::autograd::tensor_list grads) {
    auto saved = ctx->get_saved_variables();
    const auto* m = reinterpret_cast<const DecoderModel*>(ctx->saved_data["m"].toInt());
    const int64_t layer = ctx->saved_data["layer"].toInt();
    const auto layout = c10::static_intrusive_pointer_cast<AttentionLayout>(ctx->saved_data["layout"].toCapsule());
    torch::Tensor in = saved[0].detach().requires_grad_(true);
    MoeRouting r;
    if (saved[2].numel() > 0) {
      const int64_t moe_layers = m->config().moe_layer_count();
      r.replay = saved[2].unsqueeze(1).expand({saved[2].size(0), moe_layers, saved[2].size(1)});  // a view: every slot is this layer's
      r.keep_logits = true;
    }
    std::vector<torch::Tensor> outs, out_grads;
    {
      std::optional<GeneratorReplay> replay;
      if (ctx->saved_data.count("generator_state") > 0) replay.emplace(in.device(), ctx->saved_data["generator_state"].toTensor());
      torch::AutoGradMode enable(true);
      outs.push_back(m->layer_forward(layer, in, saved[1], *layout, &r));
    }
    out_grads.push_back(grads[0]);
    if (!r.logits.empty() && grads.size() > 1 && grads[1].defined()) outs.push_back(r.logits[0]), out_grads.push_back(grads[1]);
    std::vector<torch::Tensor> inputs = {in};
    const std::string pre = "model.layers." + std::to_string(layer) + ".";
    for (const auto& [name, t] : m->named_parameters())
      if (name.rfind(pre, 0) == 0 && t.requires_grad()) inputs.push_back(t);
    if (const LoraAdapter* lora = m->lora())
      for (size_t k = 0; k < kLoraModules; ++k)
        for (const torch::Tensor* t : {&lora->a(layer, static_cast<LoraModule>(k)), &lora->b(layer, static_cast<LoraModule>(k))})
          if (t->defined() && t->requires_grad()) inputs.push_back(*t);
    auto g = torch::autograd::grad(outs, inputs, out_grads, /*retain_graph=*/false, /*create_graph=*/false, /*allow_unused=*/true);
    // Parameter grads accumulate directly; the input grad flows back.
    for (size_t i = 1; i < inputs.size(); ++i)
      if (g[i].defined()) {
        auto& p = const_cast<torch::Tensor&>(inputs[i]);
        if (p.grad().defined()) p.mutable_grad() += g[i];
        else p.mutable_grad() = g[i].clone();
      }
    return {g[0], torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

torch::Tensor DecoderModel::run_layers(torch::Tensor x, const torch::Tensor& rope, const c10::intrusive_ptr<AttentionLayout>& layout, bool checkpoint,
                                       MoeRouting* routing) const {
  for (int64_t l = 0; l < config_.num_hidden_layers; ++l) {
    if (checkpoint && x.requires_grad()) {
      const int64_t mi = moe_index_[static_cast<size_t>(l)];
      torch::Tensor replay = torch::empty({0}, torch::kInt64);
      if (mi >= 0 && routing != nullptr && routing->replay.defined())
        replay = routing->replay.narrow(1, mi, 1).expand({routing->replay.size(0), config_.moe_layer_count(), routing->replay.size(2)});
      auto outs = CheckpointedLayer::apply(x, this, l, rope, layout, replay);
      x = outs[0];
      if (mi >= 0 && routing != nullptr) {
        if (routing->keep_logits) routing->logits.push_back(outs[1]);
        if (routing->record) routing->chosen.push_back(outs[2].detach());
      }
    } else {
      x = layer_forward(l, x, rope, *layout, routing);
    }
  }
  return rms_norm(x, p("model.norm.weight"));
}

const torch::Tensor& DecoderModel::head_weight() const {
  return p(config_.tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight");
}

namespace {

// The head's float32 logits of `rows` (compute: float32 or float64): from
// the model's own bf16/fp16 operands where the CUDA product applies, else
// from operands cast to the compute dtype (TF32 tensor cores for a bf16
// model on CUDA). The engine's logits() and the trainer's log-probs
// (TokenLogprob, InvariantTokenLogprob) compute the same product; on CPU a
// step of one or two rows takes it row by row (below), so outside the
// batch-invariant mode (32-row chunks) its rounding can differ in the last bit.
bool fused_head_product(const torch::Tensor& rows, const torch::Tensor& w, torch::ScalarType compute) {
  return compute == torch::kFloat32 && rows.scalar_type() == w.scalar_type() && fused::float32_product_applies(rows.device(), w.scalar_type());
}
// On CPU one or two rows (a decode step of one or two requests) take a
// matrix-vector product each: BLAS's matrix-matrix path repacks the whole
// [V, H] weight on every call, which for a 151k-row head cost three times
// the product itself (4.0 ms against 1.3 ms for one row at H = 64, 2 cores).
constexpr int64_t kCpuVectorHeadRows = 2;
torch::Tensor head_logits(const torch::Tensor& rows, const torch::Tensor& w, torch::ScalarType compute) {
  if (fused_head_product(rows, w, compute)) return fused::float32_product(rows, w);
  if (rows.device().is_cpu() && rows.dim() == 2 && rows.size(0) >= 1 && rows.size(0) <= kCpuVectorHeadRows) {
    const torch::Tensor r = rows.to(compute), wc = w.to(compute);
    std::vector<torch::Tensor> each;
    for (int64_t i = 0; i < r.size(0); ++i) each.push_back(torch::mv(wc, r[i]));
    return torch::stack(each);
  }
  return torch::linear(rows.to(compute), w.to(compute));
}

// Whether the head's backward takes half_precision_head_backward: a bf16
// model whose forward took the bf16 -> float32 product. Not fp16: a logit
// gradient g p / T is often near 1e-9, below fp16's smallest value, and
// there is no loss scaling; bf16 has float32's range.
bool half_precision_head(const torch::Tensor& h, const torch::Tensor& w, torch::ScalarType compute) {
  return w.scalar_type() == torch::kBFloat16 && fused_head_product(h, w, compute);
}

// The head's input and weight gradients for a bf16 model on CUDA, from
// p = softmax(logits / T) in float32 (consumed), the targets and g / T
// ([N, 1], g the log-probs' gradients): the logit gradients
// g (onehot - p) / T are formed in float32 and rounded once to bf16 (as
// autocast's backward has them; the rest of the backward is bf16 too), then
// both products run at the tensor cores' bf16 rate with float32 sums, where
// TF32 products of float32 copies ran at half that rate. The weight's
// gradient only when it is wanted (a frozen head under LoRA is not).
torch::autograd::tensor_list half_precision_head_backward(torch::Tensor p, const torch::Tensor& targets, const torch::Tensor& g_over_t,
                                                          const torch::Tensor& h, const torch::Tensor& w, bool weight_grad) {
  p.scatter_add_(1, targets.to(torch::kInt64).view({-1, 1}), torch::full({p.size(0), 1}, -1.0, p.options()));  // p - onehot
  torch::Tensor d = torch::empty(p.sizes(), p.options().dtype(w.scalar_type()));
  at::mul_out(d, p, -g_over_t);
  return {fused::float32_matmul(d, w).to(h.scalar_type()), weight_grad ? fused::float32_matmul(d.t(), h).to(w.scalar_type()) : torch::Tensor()};
}

}  // namespace

torch::Tensor DecoderModel::logits(const torch::Tensor& h) const {
  // The head in float32 at least: sampled log-probs must not come from bfloat16 logits.
  const auto compute = dtype_ == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
  const bool fused_head = compute == torch::kFloat32 && fused::float32_product_applies(h.device(), dtype_);
  if (!fused_head) enable_tf32_head(h, dtype_);
  const torch::Tensor w = fused_head ? head_weight() : head32_.defined() && compute == torch::kFloat32 ? head32_ : head_weight().to(compute);
  auto f = [&](const torch::Tensor& rows) { return head_logits(rows, w, compute); };
  return invariant_ ? invariant::by_rows(h, f) : f(h);
}

namespace {

// Batch-invariant log-probs by chunk: log_softmax(logits / T)[target] of one
// chunk's rows ([rows, V], [rows, 1], [rows, 1]), and its log-sum-exp.
std::pair<torch::Tensor, torch::Tensor> chunk_logprobs(const torch::Tensor& logits, const torch::Tensor& targets, const torch::Tensor& temperatures) {
  const torch::Tensor scaled = logits / temperatures;
  const torch::Tensor lp = torch::log_softmax(scaled, -1);
  return {lp.gather(1, targets).squeeze(1), (scaled.narrow(1, 0, 1) - lp.narrow(1, 0, 1)).squeeze(1)};
}

// Targets [n] and temperatures [n] as padded [rows, 1] columns (padding divides by 1).
std::pair<torch::Tensor, torch::Tensor> padded_targets(const torch::Tensor& targets, const torch::Tensor& temperatures, const torch::TensorOptions& opts) {
  const int64_t n = targets.size(0);
  const torch::Tensor tg = invariant::padded_rows(upload(targets.to(torch::kInt64), opts.device()).view({-1, 1}));
  const torch::Tensor t = torch::cat({upload(temperatures.to(opts.dtype().toScalarType()), opts.device()).view({-1, 1}), torch::ones({tg.size(0) - n, 1}, opts)});
  return {tg, t};
}

// The trainer's side of batch-invariant log-probs, from the hidden states:
// the forward is the engine's (the head by chunk, then chunk_logprobs), so
// the values are bit for bit what it records; the backward needs no such
// promise and recomputes the logits in one product, as TokenLogprob does
// (a chunked backward would reread the head weight once a chunk).
struct InvariantTokenLogprob : torch::autograd::Function<InvariantTokenLogprob> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, torch::Tensor h, torch::Tensor w, torch::Tensor targets, torch::Tensor temperatures,
                               int64_t compute) {
    const auto c = static_cast<torch::ScalarType>(compute);
    const auto opts = torch::TensorOptions().dtype(c).device(h.device());
    const int64_t n = h.size(0), chunk = invariant::shape(h.device()).rows;
    // The engine's product (logits()): the model's own operands where the fused product applies, fp16 included.
    const bool fused_head = fused_head_product(h, w, c);
    if (!fused_head) enable_tf32_head(h, w.scalar_type());
    const torch::Tensor w_in = fused_head ? w : w.to(c), hp = invariant::padded_rows(h);
    const auto [tg, t] = padded_targets(targets, temperatures, opts);
    std::vector<torch::Tensor> lps, lses;
    for (int64_t r = 0; r < hp.size(0); r += chunk) {
      auto [lp, lse] = chunk_logprobs(head_logits(hp.narrow(0, r, chunk), w_in, c), tg.narrow(0, r, chunk), t.narrow(0, r, chunk));
      lps.push_back(lp), lses.push_back(lse);
    }
    const torch::Tensor lse = torch::cat(lses).narrow(0, 0, n);
    ctx->save_for_backward({h, w, targets, t.narrow(0, 0, n), lse});
    return torch::cat(lps).narrow(0, 0, n);
  }
  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx, torch::autograd::tensor_list grads) {
    auto saved = ctx->get_saved_variables();
    const torch::Tensor &h = saved[0], &w = saved[1], &targets = saved[2], &t = saved[3], &lse = saved[4];
    const auto c = lse.scalar_type();
    if (half_precision_head(h, w, c)) {
      const auto hw = half_precision_head_backward(head_logits(h, w, c).div_(t).sub_(lse.unsqueeze(1)).exp_(), targets, grads[0].to(c).unsqueeze(1) / t, h, w,
                                                   ctx->needs_input_grad(1));
      return {hw[0], hw[1], torch::Tensor(), torch::Tensor(), torch::Tensor()};
    }
    enable_tf32_head(h, w.scalar_type());
    const torch::Tensor w32 = w.to(c), h32 = h.to(c);
    const torch::Tensor g = grads[0].to(c).unsqueeze(1);
    // d = g * (onehot - softmax(logits / T)) / T
    torch::Tensor d = torch::linear(h32, w32).div_(t).sub_(lse.unsqueeze(1)).exp_().mul_(-g);
    d.scatter_add_(1, targets.to(torch::kInt64).unsqueeze(1), g).div_(t);
    return {torch::matmul(d, w32).to(h.scalar_type()), torch::matmul(d.t(), h32).to(w.scalar_type()), torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor DecoderModel::sampled_logprobs(const torch::Tensor& logits, const torch::Tensor& targets, const torch::Tensor& temperatures) const {
  const int64_t n = logits.size(0), chunk = invariant::shape(logits.device()).rows;
  const torch::Tensor lg = invariant::padded_rows(logits);
  const auto [tg, t] = padded_targets(targets, temperatures, logits.options());
  std::vector<torch::Tensor> out;
  for (int64_t r = 0; r < lg.size(0); r += chunk) out.push_back(chunk_logprobs(lg.narrow(0, r, chunk), tg.narrow(0, r, chunk), t.narrow(0, r, chunk)).first);
  return torch::cat(out, 0).narrow(0, 0, n);
}

torch::Tensor DecoderModel::attend_invariant_heads(const torch::Tensor& q, const invariant::AttentionPlan& plan, const invariant::KeyBlocks& keys) const {
  return invariant::attend(q, plan, keys, config_.num_key_value_heads, 1.0 / std::sqrt(static_cast<double>(config_.head_dim)));
}

void DecoderModel::set_batch_invariant(bool on) {
  if (on && !invariant_) {
    if (config_.moe_layer_count() > 0 || config_.attention_sinks || config_.has_sliding_layers())
      throw Error(AREAL_CODE_UNSUPPORTED, "batch_invariant covers dense models with plain causal attention; " + config_.family +
                                              " (experts, attention sinks or sliding windows) is not covered yet");
    // The log-prob head runs in float32 whatever the model's dtype. On a GPU
    // (cuBLAS, one fixed shape) gpu_check measures the gap itself.
    if (device_.is_cpu() && (!invariant::row_invariant_products(device_, dtype_) || !invariant::row_invariant_products(device_, torch::kFloat32)))
      throw Error(AREAL_CODE_UNSUPPORTED,
                  "batch_invariant on " + device_.str() + ": this device's matrix products compute a row differently depending on where it sits "
                  "among the product's rows, so a token's log-probs would depend on its batch. On CPU this is OpenBLAS's FMA kernels (its "
                  "Haswell, Zen and newer cores): start the process with OPENBLAS_CORETYPE=Nehalem, whose kernels compute every row alike "
                  "(slower), or use the mode on a GPU (docs/gpu.md, \"Bitwise mode\")");
    // cos and sin of every position on the host, once: the same table on
    // every device whatever the kernels' vector widths. The angles are
    // float32 products as in rope_table; their cos and sin come from libm in
    // float64, so they are the correctly rounded values of those angles.
    const int64_t P = config_.max_position_embeddings, hd = config_.head_dim, half = hd / 2;
    const torch::Tensor inv = inv_freq_.to(torch::kCPU, torch::kFloat32).contiguous();
    const float* f = inv.data_ptr<float>();
    torch::Tensor table = torch::empty({2, P, 1, hd}, torch::kFloat64);
    double* c = table.data_ptr<double>();
    double* sn = c + P * hd;
    for (int64_t pos = 0; pos < P; ++pos)
      for (int64_t i = 0; i < half; ++i) {
        const double a = static_cast<float>(pos) * f[i];  // the float32 product
        c[pos * hd + i] = c[pos * hd + half + i] = static_cast<float>(std::cos(a)) * static_cast<float>(rope_scale_);
        sn[pos * hd + half + i] = static_cast<float>(std::sin(a)) * static_cast<float>(rope_scale_);
        sn[pos * hd + i] = -sn[pos * hd + half + i];  // apply_rope's signed sine
      }
    invariant_rope_ = table.to(device_, dtype_);
  }
  if (!on) invariant_rope_ = torch::Tensor();
  invariant_ = on;
  if (on) decode_kernels_ = false;  // the bitwise mode keeps its own kernel shapes
}

namespace {

// log p(target | h) = log_softmax(h W^T / temperature)[target], fused so one
// [T, vocab] tensor is all that stays for backward: the log-probabilities,
// which the backward turns into dlogits in place (exp gives the softmax)
// instead of allocating the gather's dense gradient and log_softmax's
// gradient (each as large as the logits, which dominate a small model's
// step). log_softmax is one kernel where logsumexp took four (max,
// subtract, exp, sum) and a temporary as large, and the backward's softmax
// is then one exp in place where it took a subtract and an exp.
struct TokenLogprob : torch::autograd::Function<TokenLogprob> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, torch::Tensor h, torch::Tensor w, torch::Tensor targets,
                               double temperature, int64_t compute) {
    const auto c = static_cast<torch::ScalarType>(compute);  // float32 at least, whatever the model's dtype
    if (!fused_head_product(h, w, c)) enable_tf32_head(h, w.scalar_type());
    torch::Tensor logits = head_logits(h, w, c);
    if (temperature != 1.0) logits.div_(temperature);
    const torch::Tensor all = torch::log_softmax(logits, -1);
    logits = torch::Tensor();  // freed before anything else is allocated
    ctx->save_for_backward({h, w, targets, all});
    ctx->saved_data["temperature"] = temperature;
    return all.gather(1, targets.unsqueeze(1)).squeeze(1);
  }
  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx, torch::autograd::tensor_list grads) {
    auto saved = ctx->get_saved_variables();
    const torch::Tensor &h = saved[0], &w = saved[1], &targets = saved[2];
    torch::Tensor d = saved[3].exp_();  // the log-probs, consumed: softmax, then d = g * (onehot - softmax) / temperature
    const torch::Tensor g = grads[0].to(d.scalar_type());
    const double temperature = ctx->saved_data["temperature"].toDouble();
    if (half_precision_head(h, w, d.scalar_type())) {
      const auto hw = half_precision_head_backward(d, targets, g.unsqueeze(1) / temperature, h, w, ctx->needs_input_grad(1));
      return {hw[0], hw[1], torch::Tensor(), torch::Tensor(), torch::Tensor()};
    }
    d.mul_(-g.unsqueeze(1));
    d.scatter_add_(1, targets.unsqueeze(1), g.unsqueeze(1));
    if (temperature != 1.0) d.div_(temperature);
    const auto c = d.scalar_type();
    enable_tf32_head(d, w.scalar_type());
    return {torch::matmul(d, w.to(c)).to(h.scalar_type()), torch::matmul(d.t(), h.to(c)).to(w.scalar_type()), torch::Tensor(), torch::Tensor(),
            torch::Tensor()};
  }
};

}  // namespace

torch::Tensor DecoderModel::logprobs_tree(const Tree& tree, const torch::Tensor& previous, float temperature, bool checkpoint,
                                          MoeRouting* routing) const {
  if (!(temperature > 0)) throw Error(AREAL_CODE_INVALID_ARGUMENT, "temperature must be > 0 for log-probs");
  const auto compute = dtype_ == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
  const torch::Tensor h = hidden_tree(tree, checkpoint, routing);
  const torch::Tensor prev = upload(previous.to(torch::kInt64), device_);
  if (prev.dim() != 1 || prev.size(0) != h.size(0)) throw Error(AREAL_CODE_INVALID_ARGUMENT, "tree: previous must be [N]");
  // Each token scored from the hidden state of the token before it on its path.
  const torch::Tensor before = h.index_select(0, prev.clamp_min(0)), targets = upload(tree.ids.to(torch::kInt64), device_).contiguous();
  const torch::Tensor lp =
      invariant_ ? InvariantTokenLogprob::apply(before, head_weight(), targets,
                                                torch::full({before.size(0)}, temperature, torch::TensorOptions().dtype(compute).device(device_)),
                                                static_cast<int64_t>(compute))
                 : TokenLogprob::apply(before, head_weight(), targets, static_cast<double>(temperature), static_cast<int64_t>(compute));
  return lp * prev.ge(0).to(compute);
}

torch::Tensor DecoderModel::logprobs(const torch::Tensor& ids, const torch::Tensor& cu_seqlens, float temperature, bool checkpoint,
                                     MoeRouting* routing) const {
  if (!(temperature > 0)) throw Error(AREAL_CODE_INVALID_ARGUMENT, "temperature must be > 0 for log-probs");
  const torch::Tensor ids64 = upload(ids.to(torch::kInt64), device_);
  // Float32 at least (as HF upcasts logits); a float64 model keeps float64.
  const auto compute = dtype_ == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
  const torch::Tensor h = hidden(ids, cu_seqlens, checkpoint, routing);  // the host's ids: their range is checked without a device sync
  const int64_t T = ids64.size(0);
  // Position t scores token t from the hidden state at t-1; sequence starts get 0.
  const auto opts = torch::TensorOptions().dtype(compute).device(device_);
  torch::Tensor out = torch::zeros({T}, opts);
  if (T > 1) {
    const torch::Tensor prev =
        invariant_ ? InvariantTokenLogprob::apply(h.narrow(0, 0, T - 1), head_weight(), ids64.narrow(0, 1, T - 1), torch::full({T - 1}, temperature, opts),
                                                  static_cast<int64_t>(compute))
                   : TokenLogprob::apply(h.narrow(0, 0, T - 1), head_weight(), ids64.narrow(0, 1, T - 1).contiguous(),
                                         static_cast<double>(temperature), static_cast<int64_t>(compute));
    torch::Tensor mask = torch::ones({T}, torch::kBool);
    const torch::Tensor cu = cu_seqlens.to(torch::kCPU, torch::kInt64).contiguous();
    const auto* bounds = cu.data_ptr<int64_t>();
    auto* keep = mask.data_ptr<bool>();
    for (int64_t b = 0; b + 1 < cu.size(0); ++b)
      if (bounds[b] < T) keep[bounds[b]] = false;
    out = torch::cat({torch::zeros({1}, opts), prev}) * upload(mask.to(compute), device_);
  }
  return out;
}

}  // namespace areal::torch_model
