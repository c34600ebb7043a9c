// A decoder-only LLM (Qwen3, Qwen3-MoE, GPT-OSS, Qwen2/2.5, Llama 3) in libtorch, computing
// exactly what Hugging Face's implementations compute, over packed
// variable-length sequences (no padding). Shared by the train plugin and the
// local inference plugin, so sampled and trained log-probs come from one
// piece of code. Device- and dtype-generic: the same code runs on CPU and
// CUDA, in float32/float64 or bfloat16/float16 compute (norms, softmax and
// the log-prob head always in float32 at least, as HF does).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>
#include <cstdint>

#include <c10/util/intrusive_ptr.h>
#include <torch/autograd.h>
#include <torch/types.h>

#include "batch_invariant.hpp"
#include "core/hf/model_files/model_config.hpp"
#include "lora_adapter.hpp"

namespace areal::torch_model {

struct AttentionLayout;    // attention_layout.hpp
struct CheckpointedLayer;  // decoder_model.cpp: a layer recomputed in backward

// Expert routing of one forward pass of a mixture-of-experts model, MoE
// layer by MoE layer (ModelConfig::is_moe_layer). Rows are the forward's
// token rows.
struct MoeRouting {
  // In: the experts to use instead of the router's top-k (routing replay),
  // [T, moe layers, k] integers; the weights still come from the router's
  // current probabilities at those experts. Undefined: the router chooses;
  // a row whose first slot is negative (not recorded) too. Ids must be
  // below num_experts (the caller checks, once per batch).
  torch::Tensor replay;
  // Out, when `record`: the experts each MoE layer used, [T, k] int64.
  bool record = false;
  std::vector<torch::Tensor> chosen;
  // Out, when `keep_logits`: each MoE layer's router logits [T, E] (with
  // their graph, for the load-balancing loss).
  bool keep_logits = false;
  std::vector<torch::Tensor> logits;
};

// HF's auxiliary load-balancing loss (Switch Transformer's, as transformers'
// load_balancing_loss_func computes it) over every MoE layer's router
// logits: E * sum_e f_e * P_e, f_e the fraction of (token, slot) choices of
// expert e and P_e its mean router probability; k when perfectly balanced.
torch::Tensor load_balancing_loss(const std::vector<torch::Tensor>& router_logits, int64_t num_experts, int64_t top_k);

// Layer math the model and its kernels' references (decode_kernels.cpp)
// share, so that a reference is the model's own computation.
// RMSNorm over x's last dimension without libtorch's fused kernel: in
// float32 at least (HF's order), rounded to x's dtype, then scaled by w
// (undefined: not scaled).
torch::Tensor portable_rms_norm(const torch::Tensor& x, const torch::Tensor& w, double eps);
// Each half of every head swapped, [x1, x2] -> [x2, x1] (RoPE's rotate_half
// with the sign left to the table).
torch::Tensor halves_swapped(const torch::Tensor& x);

class DecoderModel {
 public:
  // Random init (seeded, N(0, initializer_range), drawn on the CPU so a
  // seed gives the same weights on every device).
  DecoderModel(model::ModelConfig config, torch::Dtype dtype, uint64_t seed, torch::Device device = torch::kCPU);
  // From a Hugging Face folder (config.json + safetensors, sharded or not).
  static DecoderModel load(const std::string& dir, torch::Dtype dtype, torch::Device device = torch::kCPU);
  // Writes config.json + model.safetensors in `file_dtype` ("float32",
  // "bfloat16", "float16"); tokenizer files are the caller's business.
  void save(const std::string& dir, const std::string& file_dtype) const;
  // The same with other values for the weights (config.weights() order),
  // e.g. the trainer's float32 master copy of bfloat16 compute weights.
  void save(const std::string& dir, const std::string& file_dtype, const std::vector<torch::Tensor>& values) const;

  // Hidden states of packed sequences: ids [T] (int64), cu_seqlens [B+1]
  // (int64). With `checkpoint`, each layer's activations are recomputed in
  // backward instead of stored.
  // `routing` (MoE models): replayed experts in, chosen experts and router
  // logits out.
  torch::Tensor hidden(const torch::Tensor& ids, const torch::Tensor& cu_seqlens, bool checkpoint = false, MoeRouting* routing = nullptr) const;
  // Hidden states of a prefix tree's packed tokens (the layout of
  // core/trainer/prefix_tree.hpp, issue #36): segment s holds tokens
  // [begin[s], end[s]) and continues segment parent[s] (-1: a root;
  // parents listed first, segments tiling the tokens in order). A token
  // sees the earlier tokens of its segment and every token of its ancestor
  // segments, at `positions` (its depth): each row through it computes the
  // same hidden state there, so shared prefixes are computed once.
  // `checkpoint` and `routing` as for hidden(), with the tree's tokens as
  // the rows.
  struct Tree {
    torch::Tensor ids, positions;  // [N] int64
    std::vector<int64_t> begin, end, parent;
  };
  torch::Tensor hidden_tree(const Tree& tree, bool checkpoint = false, MoeRouting* routing = nullptr) const;
  // log p(ids[j] | its path) at `temperature` for every packed token j,
  // from the hidden state of previous[j] ([N] int64, -1 at a row's start:
  // 0 there). Gathered by row, these are each row's own log-probs.
  torch::Tensor logprobs_tree(const Tree& tree, const torch::Tensor& previous, float temperature, bool checkpoint = false,
                              MoeRouting* routing = nullptr) const;
  torch::Tensor logits(const torch::Tensor& hidden) const;  // [T, vocab], float32 at least
  const torch::Tensor& head_weight() const;                 // lm_head, or the tied embedding
  // log p(ids[t] | ids[<t]) within each sequence at `temperature`; 0 at each
  // sequence's first position. [T], float32 (float64 for a float64 model).
  torch::Tensor logprobs(const torch::Tensor& ids, const torch::Tensor& cu_seqlens, float temperature, bool checkpoint = false,
                         MoeRouting* routing = nullptr) const;

  // A LoRA adapter on the projections (null: none). Its low-rank term is
  // added to every targeted projection's output in forward and backward,
  // training and serving alike; the base weights are untouched.
  void set_lora(std::shared_ptr<const LoraAdapter> adapter) { lora_ = std::move(adapter); }
  const LoraAdapter* lora() const { return lora_.get(); }
  // Adapters by row, for a serving step that mixes requests of several
  // adapters and of the base model in one batch: each group's low-rank term
  // is added to its rows only (int64 indices into the step's activation
  // rows: packed prompt tokens in prefill, batch rows in decoding, on the
  // model's device); rows in no group compute the base model. Overrides
  // set_lora while non-empty; an empty list clears it.
  struct LoraRows {
    std::shared_ptr<const LoraAdapter> adapter;
    torch::Tensor rows;
  };
  void set_lora_rows(std::vector<LoraRows> groups) { lora_rows_ = std::move(groups); }

  // Batch-invariant mode (batch_invariant.hpp, issue #33): each token's
  // hidden states and log-probs no longer depend on the rest of its batch,
  // so an engine and a trainer both in this mode agree bit for bit. Slower;
  // off by default. Dense models with plain causal attention (no experts,
  // sinks or sliding windows): others are refused with an error.
  void set_batch_invariant(bool on);
  bool batch_invariant() const { return invariant_; }
  // Attention of q [rows, H, hd] per an invariant plan over the keys
  // `keys` gives: [rows, H*hd], before o_proj (the engine's cache path).
  torch::Tensor attend_invariant_heads(const torch::Tensor& q, const invariant::AttentionPlan& plan, const invariant::KeyBlocks& keys) const;
  // log softmax(logits / temperature)[target] per row, from [N, V] float32
  // logits, [N] targets and [N] temperatures, in chunks of invariant::shape().rows
  // rows: what the engine records and the trainer recomputes in
  // batch-invariant mode, by one function.
  torch::Tensor sampled_logprobs(const torch::Tensor& logits, const torch::Tensor& targets, const torch::Tensor& temperatures) const;

  // For serving: each layer's q, k and v projections (and gate and up) as
  // one matrix, so a step runs one product where it ran three (two): the
  // parameters become row views of the joined matrix, so weight updates
  // copied into them land there. The joined product rounds like the
  // separate ones up to the kernel's tiling; batch-invariant mode keeps
  // the separate products (a trainer computes those). Not for training:
  // the views are not leaves.
  void join_projections();
  // For serving a bfloat16/float16 model: keep the float32 copy of the head
  // weight the log-prob head computes with, instead of casting it every
  // step. Call again after the weights change (it copies in place). No copy
  // where the head multiplies the bf16 weight itself into float32 logits
  // (CUDA, fused::float32_product).
  void keep_float32_head();
  // For serving (after join_projections): with `on`, the decode step's
  // per-head norms, RoPE and cache writes run as one of areal's own CUDA
  // kernels, and silu(gate) * up as another, where they apply
  // (decode_kernels.hpp; probed here, before any graph capture). Off by
  // default and in batch-invariant mode: the trainer keeps libtorch's kernels.
  void use_decode_kernels(bool on);
  bool decode_kernels() const { return decode_kernels_; }

  std::vector<torch::Tensor> parameters() const;  // in config.weights() order
  const std::map<std::string, torch::Tensor>& named_parameters() const { return params_; }
  const model::ModelConfig& config() const { return config_; }
  torch::Dtype dtype() const { return dtype_; }
  torch::Device device() const { return device_; }

  // Layer math, public for the KV-cache decoder of the inference plugin.
  // RMSNorm over x's last dimension, scaled by w (undefined: not scaled).
  torch::Tensor rms_norm(const torch::Tensor& x, const torch::Tensor& w) const;
  // cos and sin of the rotary angles at `positions` ([S] int64), computed
  // once per forward for every layer: [2, S, 1, hd] in the model's dtype,
  // the sine's first half negated (what apply_rope multiplies by).
  torch::Tensor rope_table(const torch::Tensor& positions) const;
  torch::Tensor apply_rope(const torch::Tensor& x, const torch::Tensor& rope) const;  // x [S, heads, hd]
  // The layer's MLP: dense, or (MoE layers) the router and its experts.
  torch::Tensor mlp(int64_t layer, const torch::Tensor& x, MoeRouting* routing = nullptr) const;
  // q, k, v projections (+ bias, q/k norm, RoPE from rope_table); [S, heads, hd].
  void qkv(int64_t layer, const torch::Tensor& x, const torch::Tensor& rope, torch::Tensor& q, torch::Tensor& k, torch::Tensor& v) const;
  // Serving's layer up to attention over a KV cache: the input norm of x,
  // then qkv; the rows' keys and values written into the layer's caches
  // [slots, capacity, kv, hd] at (slots, positions) ([S] int64 on the
  // device); the queries [S, H, hd] returned. One kernel from the
  // projection on with use_decode_kernels.
  torch::Tensor queries_caching_keys(int64_t layer, const torch::Tensor& x, const torch::Tensor& rope, const torch::Tensor& k_cache,
                                     const torch::Tensor& v_cache, const torch::Tensor& slots, const torch::Tensor& positions) const;
  // Causal attention of q over k/v (k/v may include a cached prefix): [S, H*hd] after o_proj.
  torch::Tensor attend(int64_t layer, const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, int64_t q_offset) const;
  // Causal attention within each sequence of a packed batch (bounds: B+1
  // row offsets into q/k/v [T, heads, hd]): [T, H*hd] after o_proj. Short
  // sequences of similar length share one padded batched attention (many
  // short sequences are otherwise thousands of tiny kernels a step: the
  // CPU quickstart's 144 episodes); long ones keep a call each.
  torch::Tensor attend_packed(int64_t layer, const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                              const std::vector<int64_t>& bounds) const;
  // The same before o_proj: [T, H*hd]. A prefill that attends its rows in
  // parts projects them together, so per-row LoRA groups index every row.
  // On CUDA (bf16/fp16) one varlen flash call serves every sequence;
  // `offsets` are varlen_offsets(bounds), made here when undefined.
  torch::Tensor attend_packed_heads(int64_t layer, const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                    const std::vector<int64_t>& bounds, const torch::Tensor& offsets = {}) const;
  // `bounds` as int32 on the device, the varlen flash kernel's offsets, when
  // it serves this model (else undefined): made once for a forward's layers.
  torch::Tensor varlen_offsets(const std::vector<int64_t>& bounds) const;
  // attend without o_proj: [S, H*hd].
  torch::Tensor attend_heads(int64_t layer, const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, int64_t q_offset) const;
  torch::Tensor o_proj(int64_t layer, const torch::Tensor& heads) const;  // [S, H*hd] -> [S, hidden]
  // Serving's residual adds, the rest of a layer after attention: x +
  // o_proj(heads), then x + mlp(post-attention norm of x). Without autograd
  // and outside batch-invariant mode the dense products add into x
  // themselves (addmm with beta 1; x [S, hidden] is consumed, updated in
  // place): a kernel a sum fewer (two a dense layer without an o_proj
  // bias; a bias or an adapter term is then added after), which a small
  // decode step's time follows, and in bf16 the product and residual
  // rounded once. Elsewhere (the trainer, whose no-grad recompute must equal
  // its training forward; the invariant mode; an MoE layer's MLP) the sums
  // are separate additions.
  torch::Tensor add_attention_output(int64_t layer, torch::Tensor x, const torch::Tensor& heads) const;
  torch::Tensor add_mlp_output(int64_t layer, torch::Tensor x, MoeRouting* routing = nullptr) const;
  // Which keys each row of a decode step sees (attend_cached_heads), or each
  // sequence of a prefill continuing its slot (attend_cached_chunks): row
  // or sequence b's keys are rows [0, counts[b]) of its cache slot.
  struct CachedKeys {
    // Flash path: int32 on the device, counts [B] (at least one each),
    // cu_queries [B+1] (b's rows in q), cu_keys [B+1] (its slot * capacity).
    torch::Tensor counts, cu_queries, cu_keys;
    // Masked path (decode): keys [0, width) of each slot are read, `allowed`
    // [B, 1, 1, width] says which count (bool, or an additive 0/-inf mask in
    // the attention's dtype); `allowed_sliding` holds a sliding layer's window.
    int64_t width = 0;
    torch::Tensor allowed, allowed_sliding;
  };
  // Whether layer's attention over the cache runs the flash kernel on the
  // keys' counts alone (CUDA, bf16/fp16, plain attention, not
  // batch-invariant); otherwise decode takes CachedKeys' masks and a
  // continuing prefill attends sequence by sequence.
  bool flash_cached(int64_t layer) const;
  // One new token per row over that row's cached keys, all rows at once
  // (batched decoding): q [B, H, hd], k_cache/v_cache the layer's cache,
  // token-major [slots >= B, capacity, kv_heads, hd] (slot i is row i's), read
  // in place: no gather, no copy for grouped-query heads. [B, H*hd] before o_proj.
  torch::Tensor attend_cached_heads(int64_t layer, const torch::Tensor& q, const torch::Tensor& k_cache, const torch::Tensor& v_cache,
                              const CachedKeys& keys) const;
  // New tokens of several sequences, each continuing its cache slot (its
  // keys and values already written), in one flash call where
  // flash_cached(layer): q [T, H, hd] packed, each query over its
  // sequence's keys up to its own. [T, H*hd] before o_proj, or undefined
  // where the caller attends each sequence itself (attend_heads).
  torch::Tensor attend_cached_chunks(int64_t layer, const torch::Tensor& q, const torch::Tensor& k_cache, const torch::Tensor& v_cache,
                                     const CachedKeys& keys, int64_t longest_query) const;
  const torch::Tensor& p(const std::string& name) const;

 private:
  friend struct CheckpointedLayer;
  DecoderModel(model::ModelConfig config, torch::Dtype dtype, torch::Device device);  // no weights yet
  // Causal self-attention of G equally long sequences at once: q [G, L, H, hd],
  // k/v [G, L, kv_heads, hd] -> [G, L, H*hd].
  torch::Tensor attend_padded(int64_t layer, const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) const;
  // softmax(scores) over keys (the last dimension) in float32 at least,
  // returned in `out`. With sinks (GPT-OSS) the layer's sink logit of each
  // head joins the denominator: `sink_view` is the shape that lines the
  // [H] sinks up with the scores' head dimensions (e.g. {H, 1, 1}).
  torch::Tensor attention_probs(int64_t layer, const torch::Tensor& scores, std::vector<int64_t> sink_view, torch::ScalarType out) const;
  // Whether the layer's attention is plain causal softmax attention (no
  // sinks, no window), which the fused kernels compute.
  bool plain_attention(int64_t layer) const;
  // x W^T (+ b): one matmul, or fixed-size row chunks in batch-invariant mode.
  torch::Tensor project(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b = {}) const;
  torch::Tensor norm_rows(const torch::Tensor& x, const torch::Tensor& w) const;  // rms_norm's math
  // qkv's two halves: the projections (q, k, v [S, heads, hd]; `joined`
  // the one product they are column ranges of, when joined), then the
  // norms and RoPE.
  struct QkvProjection {
    torch::Tensor joined, q, k, v;
    bool qk_in_place = false;  // q's and k's heads side by side in `joined` (no adapter on q or k)
  };
  QkvProjection project_qkv(int64_t layer, const torch::Tensor& x) const;
  void finish_qkv(int64_t layer, const QkvProjection& projected, const torch::Tensor& rope, torch::Tensor& q, torch::Tensor& k) const;
  // A dense MLP's input to its down projection: silu(gate) * up, [S, I].
  torch::Tensor gated(int64_t layer, const torch::Tensor& x) const;
  // Whether add_attention_output / add_mlp_output add inside the product.
  bool adds_into_products(const torch::Tensor& x) const;
  // y (x's projection through the base weight) plus the adapter's term, if any.
  torch::Tensor with_lora(int64_t layer, LoraModule m, const torch::Tensor& x, torch::Tensor y) const;
  // Causal attention of G padded query blocks over G key blocks: q [G, Lq,
  // H, hd], k/v [G, Lk, kv_heads, hd], `allowed` [G, Lq, Lk] (at least one
  // key a query) -> [G, Lq, H*hd].
  torch::Tensor attend_masked(int64_t layer, const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                              const torch::Tensor& allowed) const;
  // A prefix tree's attention plan (attention_layout.hpp), checked.
  c10::intrusive_ptr<AttentionLayout> tree_layout(const Tree& tree) const;
  // Attention along the tree's paths: [N, hidden] after o_proj.
  torch::Tensor attend_tree(int64_t layer, const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, const AttentionLayout& layout) const;
  torch::Tensor layer_forward(int64_t layer, const torch::Tensor& x, const torch::Tensor& rope, const AttentionLayout& layout,
                              MoeRouting* routing) const;
  // Every decoder layer over embedded tokens x, then the final norm; with
  // `checkpoint`, each layer recomputed in backward.
  torch::Tensor run_layers(torch::Tensor x, const torch::Tensor& rope, const c10::intrusive_ptr<AttentionLayout>& layout, bool checkpoint,
                           MoeRouting* routing) const;
  // A MoE layer's MLP: top-k experts a token, their outputs weighted by the
  // router's (renormalised) probabilities.
  torch::Tensor moe(int64_t layer, const torch::Tensor& x, MoeRouting* routing) const;

  model::ModelConfig config_;
  torch::Dtype dtype_;
  torch::Device device_;
  std::map<std::string, torch::Tensor> params_;
  std::shared_ptr<const LoraAdapter> lora_;
  std::vector<LoraRows> lora_rows_;
  torch::Tensor inv_freq_;  // [hd/2], float32 as transformers and vLLM compute it, on the model's device
  double rope_scale_ = 1.0;  // cos and sin are multiplied by it (YaRN's attention factor)
  std::vector<int64_t> moe_index_;  // layer -> its index among MoE layers, -1 for dense ones
  bool invariant_ = false;
  torch::Tensor invariant_rope_;  // batch-invariant mode: cos and sin of every position, [2, positions, 1, hd], made on the host
  std::vector<torch::Tensor> joined_qkv_, joined_qkv_bias_, joined_gate_up_;  // join_projections, by layer (undefined: not joined)
  torch::Tensor head32_;  // keep_float32_head
  bool decode_kernels_ = false;  // use_decode_kernels
};

}  // namespace areal::torch_model
