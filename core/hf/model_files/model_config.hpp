// Decoder-only model configs in Hugging Face's config.json form, for the
// families areal trains and serves: Qwen3, Qwen2/2.5, Llama 3 and the
// mixture-of-experts models Qwen3-MoE (Qwen3-30B-A3B, 235B-A22B) and
// GPT-OSS (gpt-oss-20b, 120b). Knows
// every weight's HF name and shape, so a checkpoint that does not fit its
// config is refused with the tensor named.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/hf/model_files/safetensors.hpp"

namespace areal::model {

struct WeightSpec {
  std::string name;
  std::vector<int64_t> shape;
  enum Init { kNormal, kOnes, kZeros } init = kNormal;
};

struct ModelConfig {
  std::string family;  // "qwen3" | "qwen2" | "llama3" | "qwen3_moe" | "gpt_oss"
  int64_t vocab_size = 0, hidden_size = 0, intermediate_size = 0, num_hidden_layers = 0;
  int64_t num_attention_heads = 0, num_key_value_heads = 0, head_dim = 0, max_position_embeddings = 0;
  double rms_norm_eps = 1e-6, rope_theta = 10000.0, initializer_range = 0.02;
  nlohmann::json rope_scaling;  // null or the HF object (llama3: factor, low/high_freq_factor, ...)
  bool tie_word_embeddings = false;
  bool qkv_bias = false;  // Qwen2, GPT-OSS
  bool o_bias = false;    // GPT-OSS (and Llama/Qwen3 with attention_bias)
  bool qk_norm = false;   // Qwen3
  // GPT-OSS attention: a learned logit per query head (self_attn.sinks) that
  // joins every softmax's denominator and is dropped after, and layers whose
  // queries see only the last sliding_window keys, themselves included
  // (layer_types[l] == "sliding_attention").
  bool attention_sinks = false;
  int64_t sliding_window = 0;
  std::vector<std::string> layer_types;  // empty: every layer full
  int64_t attention_window(int64_t layer) const;  // 0: the whole causal prefix
  bool has_sliding_layers() const;
  int64_t bos_token_id = -1, eos_token_id = -1;
  // Every id config.json lists as eos_token_id (Llama 3.1: <|end_of_text|>,
  // <|eom_id|>, <|eot_id|>); eos_token_id is the first.
  std::vector<int64_t> eos_token_ids;
  std::string torch_dtype = "float32";
  // Mixture of experts (qwen3_moe; num_experts 0: dense). A layer's MLP is
  // a router (mlp.gate) over num_experts expert MLPs of moe_intermediate_size,
  // each token going to its top num_experts_per_tok; dense layers keep
  // intermediate_size (is_moe_layer says which).
  int64_t num_experts = 0, num_experts_per_tok = 0, moe_intermediate_size = 0, decoder_sparse_step = 1;
  std::vector<int64_t> mlp_only_layers;
  bool norm_topk_prob = true;         // renormalise the top-k routing weights to sum to 1
  double router_aux_loss_coef = 0.001;  // HF's default weight of the load-balancing loss
  // HF adds that loss in training only when output_router_logits is true
  // (its default is false; init-model's small MoE presets set it).
  bool output_router_logits = false;
  // GPT-OSS experts: every layer routes (mlp.router with a bias: top-k on
  // the logits, then a softmax over those k), and each layer's experts are
  // fused tensors with biases: gate_up_proj [E, H, 2I] (gate and up
  // interleaved, used as x @ W), down_proj [E, I, H]; the activation is
  // (clamp(up, +-limit) + 1) * g * sigmoid(alpha * g), g = min(gate, limit).
  // mxfp4_experts: the checkpoint stores those two as MXFP4 blocks and
  // scales (quantization_config.quant_method "mxfp4"), dequantized at load.
  bool fused_experts = false;
  double swiglu_alpha = 1.702, swiglu_limit = 7.0;
  bool mxfp4_experts = false;
  bool is_moe() const { return num_experts > 0; }
  bool is_moe_layer(int64_t layer) const;
  int64_t moe_layer_count() const;

  // From config.json; throws INVALID_ARGUMENT naming `where` and the key.
  static ModelConfig from_hf_json(const nlohmann::json& j, const std::string& where);
  nlohmann::json to_hf_json() const;

  std::vector<WeightSpec> weights() const;  // every tensor, HF names, in model order
  // Throws INVALID_ARGUMENT if a tensor is missing, extra, or of another shape.
  void check(const Checkpoint& c) const;
};

// Whether a GPT-OSS weight is one MXFP4 checkpoints quantize (the experts'
// gate_up_proj and down_proj, stored as NAME_blocks and NAME_scales).
bool is_mxfp4_weight(const std::string& name);

// Presets for init-model: "tiny" (tests) and "small" (quickstart, benchmarks);
// qwen3_moe also has "30b-a3b" (Qwen3-30B-A3B's shape), gpt_oss "20b".
ModelConfig preset(const std::string& family, const std::string& size, int64_t vocab_size);

}  // namespace areal::model
