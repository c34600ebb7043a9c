#include "core/hf/model_files/model_config.hpp"

#include <algorithm>
#include <cstring>
#include <set>
#include <utility>

#include "core/plugin_host/error.hpp"

namespace areal::model {
namespace {

[[noreturn]] void bad(const std::string& where, const std::string& why) { throw Error(AREAL_CODE_INVALID_ARGUMENT, where + ": " + why); }

int64_t positive(const nlohmann::json& j, const char* key, const std::string& where) {
  if (!j.contains(key) || !j[key].is_number_integer() || j[key].get<int64_t>() <= 0)
    bad(where, std::string("'") + key + "' must be a positive integer");
  return j[key].get<int64_t>();
}

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// GptOssConfig's defaults: YaRN, factor 32 over 4096 positions; even layers slide.
nlohmann::json gpt_oss_rope() {
  return {{"rope_type", "yarn"}, {"factor", 32.0}, {"beta_fast", 32.0}, {"beta_slow", 1.0}, {"truncate", false}, {"original_max_position_embeddings", 4096}};
}

std::vector<std::string> alternating_layer_types(int64_t layers) {
  std::vector<std::string> types;
  for (int64_t l = 0; l < layers; ++l) types.push_back(l % 2 == 0 ? "sliding_attention" : "full_attention");
  return types;
}

}  // namespace

ModelConfig ModelConfig::from_hf_json(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object()) bad(where, "config must be a JSON object");
  ModelConfig c;
  const std::string type = j.value("model_type", "");
  if (type == "qwen3") c.family = "qwen3", c.qk_norm = true;
  else if (type == "qwen3_moe") c.family = "qwen3_moe", c.qk_norm = true;
  else if (type == "qwen2") c.family = "qwen2", c.qkv_bias = true;
  else if (type == "llama") c.family = "llama3";
  else if (type == "gpt_oss") c.family = "gpt_oss", c.attention_sinks = true, c.fused_experts = true;
  else bad(where, "model_type '" + type + "' is not supported (qwen3, qwen3_moe, qwen2, llama, gpt_oss)");
  const bool oss = c.family == "gpt_oss";
  c.vocab_size = positive(j, "vocab_size", where);
  c.hidden_size = positive(j, "hidden_size", where);
  c.intermediate_size = positive(j, "intermediate_size", where);
  c.num_hidden_layers = positive(j, "num_hidden_layers", where);
  c.num_attention_heads = positive(j, "num_attention_heads", where);
  c.num_key_value_heads = j.contains("num_key_value_heads") ? positive(j, "num_key_value_heads", where) : c.num_attention_heads;
  c.head_dim = j.contains("head_dim") && !j["head_dim"].is_null() ? positive(j, "head_dim", where) : c.hidden_size / c.num_attention_heads;
  if (c.num_attention_heads % c.num_key_value_heads != 0) bad(where, "num_attention_heads must be a multiple of num_key_value_heads");
  if (!j.contains("head_dim") && c.hidden_size % c.num_attention_heads != 0) bad(where, "hidden_size must divide by num_attention_heads");
  if (c.head_dim % 2 != 0) bad(where, "head_dim must be even for rotary embeddings");
  // HF's defaults when config.json leaves the key out: 2048 (Llama), 32768
  // (Qwen2/3/3-MoE), 131072 (gpt-oss).
  c.max_position_embeddings = j.value("max_position_embeddings", c.family == "llama3" ? int64_t{2048} : oss ? int64_t{131072} : int64_t{32768});
  // The MLP's activation: what the model code computes is SiLU (gpt-oss: its
  // own clamped SwiGLU). Another hidden_act would load and compute something
  // else, so it is refused by name.
  if (!oss && j.contains("hidden_act") && !j["hidden_act"].is_null() && j["hidden_act"] != "silu" && j["hidden_act"] != "swish")
    bad(where, "hidden_act " + j["hidden_act"].dump() + " is not supported (the MLP computes silu(gate) * up)");
  // Qwen2/Qwen3's sliding-window attention (use_sliding_window: true) is not
  // computed for those families: refused rather than attended in full.
  if (!oss && j.value("use_sliding_window", false))
    bad(where, "use_sliding_window: true is not supported for " + type + " (every layer would attend to the whole context, unlike HF)");
  c.rms_norm_eps = j.value("rms_norm_eps", oss ? 1e-5 : 1e-6);
  c.rope_theta = j.value("rope_theta", oss ? 150000.0 : 10000.0);  // GptOssConfig.default_theta
  // transformers 5 writes the rotary settings as rope_parameters.
  if (j.contains("rope_parameters") && j["rope_parameters"].is_object() && !j.contains("rope_theta"))
    c.rope_theta = j["rope_parameters"].value("rope_theta", c.rope_theta);
  c.initializer_range = j.value("initializer_range", 0.02);
  c.rope_scaling = j.value("rope_scaling", nlohmann::json());
  // transformers 5 writes the scaling into rope_parameters too (rope_type beside rope_theta).
  if (!c.rope_scaling.is_object() && j.contains("rope_parameters") && j["rope_parameters"].is_object() &&
      j["rope_parameters"].value("rope_type", std::string("default")) != "default")
    c.rope_scaling = j["rope_parameters"];
  // GptOssConfig's rotary default when config.json names none.
  if (oss && !c.rope_scaling.is_object() && !j.contains("rope_parameters")) c.rope_scaling = gpt_oss_rope();
  if (c.rope_scaling.is_object()) {
    const std::string rt = c.rope_scaling.value("rope_type", c.rope_scaling.value("type", std::string("default")));
    // Dynamic NTK is left out on purpose: transformers rescales it by the
    // longest position of the batch, so a token's log-prob would depend on
    // which rows it is packed with.
    if (rt != "default" && rt != "llama3" && rt != "linear" && rt != "yarn")
      bad(where, "rope_scaling type '" + rt + "' is not supported (default, llama3, linear, yarn)");
  }
  c.tie_word_embeddings = j.value("tie_word_embeddings", false);
  if (c.family == "llama3") c.qkv_bias = j.value("attention_bias", false);
  if (c.family == "qwen3" || c.family == "qwen3_moe") c.qkv_bias = j.value("attention_bias", false);
  // Llama's and Qwen3's attention_bias covers o_proj too (Qwen2's bias is on q/k/v only).
  if (c.family == "llama3" || c.family == "qwen3" || c.family == "qwen3_moe") c.o_bias = c.qkv_bias;
  if (oss) {
    c.qkv_bias = c.o_bias = j.value("attention_bias", true);
    c.num_experts = j.contains("num_local_experts") ? positive(j, "num_local_experts", where) : positive(j, "num_experts", where);
    c.num_experts_per_tok = j.contains("num_experts_per_tok") ? positive(j, "num_experts_per_tok", where) : positive(j, "experts_per_token", where);
    if (c.num_experts_per_tok > c.num_experts) bad(where, "num_experts_per_tok must not exceed num_local_experts");
    c.moe_intermediate_size = c.intermediate_size;  // each expert's width
    c.router_aux_loss_coef = j.value("router_aux_loss_coef", 0.001);
    c.output_router_logits = j.contains("output_router_logits") && j["output_router_logits"].is_boolean() && j["output_router_logits"].get<bool>();
    c.swiglu_alpha = j.value("swiglu_alpha", 1.702);
    c.swiglu_limit = j.value("swiglu_limit", 7.0);
    c.sliding_window = j.contains("sliding_window") && !j["sliding_window"].is_null() ? positive(j, "sliding_window", where) : 0;
    if (j.contains("layer_types") && !j["layer_types"].is_null()) {
      if (!j["layer_types"].is_array() || static_cast<int64_t>(j["layer_types"].size()) != c.num_hidden_layers)
        bad(where, "'layer_types' must list one type per layer (" + std::to_string(c.num_hidden_layers) + ")");
      for (const auto& t : j["layer_types"]) {
        if (!t.is_string() || (t != "sliding_attention" && t != "full_attention"))
          bad(where, "'layer_types' entries must be \"sliding_attention\" or \"full_attention\", got " + t.dump());
        c.layer_types.push_back(t.get<std::string>());
      }
    } else {
      c.layer_types = alternating_layer_types(c.num_hidden_layers);
    }
    if (c.has_sliding_layers() && c.sliding_window == 0) bad(where, "'layer_types' has sliding layers but 'sliding_window' is not set");
    if (j.contains("quantization_config") && j["quantization_config"].is_object()) {
      const std::string method = j["quantization_config"].value("quant_method", std::string());
      if (method != "mxfp4") bad(where, "quantization_config.quant_method '" + method + "' is not supported (mxfp4, or none)");
      c.mxfp4_experts = true;
    }
  } else if (j.contains("quantization_config") && !j["quantization_config"].is_null()) {
    bad(where, "quantized checkpoints (quantization_config) are not supported for " + c.family);
  }
  if (c.family == "qwen3_moe") {
    // Qwen's checkpoints say num_experts; transformers 5 writes num_local_experts.
    c.num_experts = j.contains("num_experts") ? positive(j, "num_experts", where) : positive(j, "num_local_experts", where);
    c.num_experts_per_tok = positive(j, "num_experts_per_tok", where);
    c.moe_intermediate_size = positive(j, "moe_intermediate_size", where);
    if (c.num_experts_per_tok > c.num_experts) bad(where, "num_experts_per_tok must not exceed num_experts");
    c.decoder_sparse_step = j.contains("decoder_sparse_step") ? positive(j, "decoder_sparse_step", where) : 1;
    c.norm_topk_prob = j.value("norm_topk_prob", false);  // HF's Qwen3MoeConfig default
    c.router_aux_loss_coef = j.value("router_aux_loss_coef", 0.001);
    c.output_router_logits = j.contains("output_router_logits") && j["output_router_logits"].is_boolean() && j["output_router_logits"].get<bool>();
    if (j.contains("mlp_only_layers") && !j["mlp_only_layers"].is_null()) {
      if (!j["mlp_only_layers"].is_array()) bad(where, "'mlp_only_layers' must be a list of layer indices");
      for (const auto& l : j["mlp_only_layers"]) {
        if (!l.is_number_integer()) bad(where, "'mlp_only_layers' must be a list of layer indices");
        c.mlp_only_layers.push_back(l.get<int64_t>());
      }
    }
  }
  auto token = [&](const char* key) -> int64_t {
    if (!j.contains(key) || j[key].is_null()) return -1;
    if (j[key].is_array()) return j[key].empty() ? -1 : j[key][0].get<int64_t>();
    return j[key].get<int64_t>();
  };
  c.bos_token_id = token("bos_token_id");
  c.eos_token_id = token("eos_token_id");
  if (j.contains("eos_token_id") && j["eos_token_id"].is_array()) {
    for (const auto& id : j["eos_token_id"]) {
      if (!id.is_number_integer()) bad(where, "'eos_token_id' must be an id or a list of ids");
      c.eos_token_ids.push_back(id.get<int64_t>());
    }
  } else if (c.eos_token_id >= 0) {
    c.eos_token_ids = {c.eos_token_id};
  }
  c.torch_dtype = j.value("torch_dtype", std::string("float32"));
  return c;
}

nlohmann::json ModelConfig::to_hf_json() const {
  nlohmann::json j;
  const bool qwen = family != "llama3";
  j["architectures"] = {family == "qwen3"       ? "Qwen3ForCausalLM"
                        : family == "qwen3_moe" ? "Qwen3MoeForCausalLM"
                        : family == "qwen2"     ? "Qwen2ForCausalLM"
                        : family == "gpt_oss"   ? "GptOssForCausalLM"
                                                : "LlamaForCausalLM"};
  j["model_type"] = family == "llama3" ? "llama" : family;
  const bool oss = family == "gpt_oss";
  if (oss) {
    j["num_local_experts"] = num_experts;
    j["num_experts_per_tok"] = num_experts_per_tok;
    j["experts_per_token"] = num_experts_per_tok;  // what OpenAI's own config.json says too
    j["router_aux_loss_coef"] = router_aux_loss_coef;
    j["output_router_logits"] = output_router_logits;
    j["swiglu_alpha"] = swiglu_alpha;
    j["swiglu_limit"] = swiglu_limit;
    j["sliding_window"] = sliding_window > 0 ? nlohmann::json(sliding_window) : nlohmann::json(nullptr);
    j["layer_types"] = layer_types;
  } else if (is_moe()) {
    j["num_experts"] = num_experts;
    j["num_experts_per_tok"] = num_experts_per_tok;
    j["moe_intermediate_size"] = moe_intermediate_size;
    j["decoder_sparse_step"] = decoder_sparse_step;
    j["mlp_only_layers"] = mlp_only_layers;
    j["norm_topk_prob"] = norm_topk_prob;
    j["router_aux_loss_coef"] = router_aux_loss_coef;
    j["output_router_logits"] = output_router_logits;
  }
  j["vocab_size"] = vocab_size;
  j["hidden_size"] = hidden_size;
  j["intermediate_size"] = intermediate_size;
  j["num_hidden_layers"] = num_hidden_layers;
  j["num_attention_heads"] = num_attention_heads;
  j["num_key_value_heads"] = num_key_value_heads;
  if (family != "qwen2") j["head_dim"] = head_dim;
  j["hidden_act"] = "silu";
  j["max_position_embeddings"] = max_position_embeddings;
  j["rms_norm_eps"] = rms_norm_eps;
  j["rope_theta"] = rope_theta;
  j["rope_scaling"] = rope_scaling;
  j["initializer_range"] = initializer_range;
  j["tie_word_embeddings"] = tie_word_embeddings;
  if (family != "qwen2") j["attention_bias"] = qkv_bias;
  j["attention_dropout"] = 0.0;
  if (family == "llama3") j["mlp_bias"] = false;
  if (qwen && !oss) {
    j["use_sliding_window"] = false;
    j["sliding_window"] = nullptr;
  }
  j["bos_token_id"] = bos_token_id >= 0 ? nlohmann::json(bos_token_id) : nlohmann::json(nullptr);
  j["eos_token_id"] = eos_token_ids.size() > 1 ? nlohmann::json(eos_token_ids) : eos_token_id >= 0 ? nlohmann::json(eos_token_id) : nlohmann::json(nullptr);
  j["torch_dtype"] = torch_dtype;
  j["use_cache"] = true;
  return j;
}

std::vector<WeightSpec> ModelConfig::weights() const {
  std::vector<WeightSpec> w;
  const int64_t q = num_attention_heads * head_dim, kv = num_key_value_heads * head_dim;
  w.push_back({"model.embed_tokens.weight", {vocab_size, hidden_size}});
  for (int64_t i = 0; i < num_hidden_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    w.push_back({p + "input_layernorm.weight", {hidden_size}, WeightSpec::kOnes});
    w.push_back({p + "self_attn.q_proj.weight", {q, hidden_size}});
    w.push_back({p + "self_attn.k_proj.weight", {kv, hidden_size}});
    w.push_back({p + "self_attn.v_proj.weight", {kv, hidden_size}});
    if (qkv_bias) {
      w.push_back({p + "self_attn.q_proj.bias", {q}, WeightSpec::kZeros});
      w.push_back({p + "self_attn.k_proj.bias", {kv}, WeightSpec::kZeros});
      w.push_back({p + "self_attn.v_proj.bias", {kv}, WeightSpec::kZeros});
    }
    if (qk_norm) {
      w.push_back({p + "self_attn.q_norm.weight", {head_dim}, WeightSpec::kOnes});
      w.push_back({p + "self_attn.k_norm.weight", {head_dim}, WeightSpec::kOnes});
    }
    w.push_back({p + "self_attn.o_proj.weight", {hidden_size, q}});
    if (o_bias) w.push_back({p + "self_attn.o_proj.bias", {hidden_size}, WeightSpec::kZeros});
    if (attention_sinks) w.push_back({p + "self_attn.sinks", {num_attention_heads}});
    w.push_back({p + "post_attention_layernorm.weight", {hidden_size}, WeightSpec::kOnes});
    if (fused_experts) {
      const int64_t I = moe_intermediate_size;
      w.push_back({p + "mlp.router.weight", {num_experts, hidden_size}});
      w.push_back({p + "mlp.router.bias", {num_experts}});  // HF draws it N(0, initializer_range) too
      w.push_back({p + "mlp.experts.gate_up_proj", {num_experts, hidden_size, 2 * I}});
      w.push_back({p + "mlp.experts.gate_up_proj_bias", {num_experts, 2 * I}, WeightSpec::kZeros});
      w.push_back({p + "mlp.experts.down_proj", {num_experts, I, hidden_size}});
      w.push_back({p + "mlp.experts.down_proj_bias", {num_experts, hidden_size}, WeightSpec::kZeros});
      continue;
    }
    if (is_moe_layer(i)) {
      w.push_back({p + "mlp.gate.weight", {num_experts, hidden_size}});
      for (int64_t e = 0; e < num_experts; ++e) {
        const std::string x = p + "mlp.experts." + std::to_string(e) + ".";
        w.push_back({x + "gate_proj.weight", {moe_intermediate_size, hidden_size}});
        w.push_back({x + "up_proj.weight", {moe_intermediate_size, hidden_size}});
        w.push_back({x + "down_proj.weight", {hidden_size, moe_intermediate_size}});
      }
      continue;
    }
    w.push_back({p + "mlp.gate_proj.weight", {intermediate_size, hidden_size}});
    w.push_back({p + "mlp.up_proj.weight", {intermediate_size, hidden_size}});
    w.push_back({p + "mlp.down_proj.weight", {hidden_size, intermediate_size}});
  }
  w.push_back({"model.norm.weight", {hidden_size}, WeightSpec::kOnes});
  if (!tie_word_embeddings) w.push_back({"lm_head.weight", {vocab_size, hidden_size}});
  return w;
}

bool is_mxfp4_weight(const std::string& name) {
  auto ends = [&](const std::string& tail) { return name.size() >= tail.size() && name.compare(name.size() - tail.size(), tail.size(), tail) == 0; };
  return ends("mlp.experts.gate_up_proj") || ends("mlp.experts.down_proj");
}

int64_t ModelConfig::attention_window(int64_t layer) const {
  if (sliding_window <= 0 || layer < 0 || layer >= static_cast<int64_t>(layer_types.size())) return 0;
  return layer_types[static_cast<size_t>(layer)] == "sliding_attention" ? sliding_window : 0;
}

bool ModelConfig::has_sliding_layers() const {
  return std::find(layer_types.begin(), layer_types.end(), "sliding_attention") != layer_types.end();
}

bool ModelConfig::is_moe_layer(int64_t layer) const {
  // HF's Qwen3MoeDecoderLayer: experts where (layer + 1) % decoder_sparse_step == 0, unless listed dense.
  if (!is_moe()) return false;
  for (int64_t l : mlp_only_layers)
    if (l == layer) return false;
  return (layer + 1) % decoder_sparse_step == 0;
}

int64_t ModelConfig::moe_layer_count() const {
  int64_t n = 0;
  for (int64_t i = 0; i < num_hidden_layers; ++i) n += is_moe_layer(i);
  return n;
}

void ModelConfig::check(const Checkpoint& c) const {
  std::set<std::string> expected;
  for (const auto& w : weights()) {
    if (mxfp4_experts && is_mxfp4_weight(w.name)) {
      // [E, rows, cols] stored as [E, cols, rows / 32, 16] bytes and [E, cols, rows / 32] exponents.
      if (w.shape[1] % 32 != 0) bad(w.name, "MXFP4 needs the reduction dimension (" + std::to_string(w.shape[1]) + ") to be a multiple of 32");
      const std::vector<int64_t> blocks = {w.shape[0], w.shape[2], w.shape[1] / 32, 16}, scales = {w.shape[0], w.shape[2], w.shape[1] / 32};
      for (const auto& [name, shape] : {std::pair{w.name + "_blocks", blocks}, std::pair{w.name + "_scales", scales}}) {
        expected.insert(name);
        const TensorInfo& t = c.tensor(name);
        if (t.shape != shape || t.dtype != DType::kU8)
          throw Error(AREAL_CODE_INVALID_ARGUMENT, "tensor '" + name + "' is " + dtype_name(t.dtype) + " " + shape_str(t.shape) + " but an MXFP4 " +
                                                       w.name + " of " + shape_str(w.shape) + " is uint8 " + shape_str(shape));
      }
      continue;
    }
    expected.insert(w.name);
    const TensorInfo& t = c.tensor(w.name);  // NOT_FOUND names it
    if (t.shape != w.shape)
      throw Error(AREAL_CODE_INVALID_ARGUMENT, "tensor '" + w.name + "' has shape " + shape_str(t.shape) + " but config.json implies " + shape_str(w.shape));
  }
  for (const auto& name : c.names())
    if (!expected.count(name) && !(tie_word_embeddings && name == "lm_head.weight"))
      throw Error(AREAL_CODE_INVALID_ARGUMENT, "the checkpoint has tensor '" + name + "', which a " + family + " model with this config.json does not");
  // A tied model's checkpoint may carry lm_head.weight too: a copy of the
  // embeddings is fine, another matrix is a head HF (transformers 5) keeps
  // untied, which a tied model here would silently replace by the embeddings.
  if (tie_word_embeddings) {
    const auto names = c.names();
    if (std::find(names.begin(), names.end(), "lm_head.weight") != names.end()) {
      const TensorInfo& head = c.tensor("lm_head.weight");
      const TensorInfo& embed = c.tensor("model.embed_tokens.weight");
      if (head.shape != embed.shape || head.dtype != embed.dtype || head.bytes != embed.bytes ||
          std::memcmp(c.data("lm_head.weight"), c.data("model.embed_tokens.weight"), head.bytes) != 0)
        throw Error(AREAL_CODE_UNSUPPORTED, "config.json ties the output head to the embeddings (tie_word_embeddings: true), but the checkpoint's "
                                            "lm_head.weight differs from model.embed_tokens.weight; HF keeps such a head untied: set "
                                            "tie_word_embeddings: false in config.json to load it that way");
    }
  }
}

ModelConfig preset(const std::string& family, const std::string& size, int64_t vocab_size) {
  if (family != "qwen3" && family != "qwen2" && family != "llama3" && family != "qwen3_moe" && family != "gpt_oss")
    throw Error(AREAL_CODE_INVALID_ARGUMENT, "--family must be qwen3, qwen3_moe, gpt_oss, qwen2 or llama3, got '" + family + "'");
  ModelConfig c;
  c.family = family;
  c.qk_norm = family == "qwen3" || family == "qwen3_moe";
  c.qkv_bias = family == "qwen2";
  c.vocab_size = (vocab_size + 63) / 64 * 64;  // embedding rows for every tokenizer id, padded as HF models are
  c.max_position_embeddings = 4096;
  if (size == "tiny" || size == "agent") {
    c.hidden_size = 64, c.intermediate_size = 128, c.num_hidden_layers = 2, c.num_attention_heads = 4, c.num_key_value_heads = 2, c.head_dim = 16;
    // agent: room for what agent programs send (Claude Code's system prompt and tools are ~20-30k Qwen3 tokens) plus a reply.
    if (size == "agent") c.max_position_embeddings = 65536;
  } else if (size == "tiny-hd32") {
    // tiny's parameter count in the shape vLLM's CPU attention takes (head
    // sizes of 32 and up; docs/backends.md), untied below.
    c.hidden_size = 64, c.intermediate_size = 128, c.num_hidden_layers = 2, c.num_attention_heads = 2, c.num_key_value_heads = 1, c.head_dim = 32;
  } else if (size == "small") {
    c.hidden_size = 256, c.intermediate_size = 768, c.num_hidden_layers = 4, c.num_attention_heads = 8, c.num_key_value_heads = 4, c.head_dim = 32;
  } else if (size == "0.6b") {
    // Qwen3-0.6B's shape (about 0.6B parameters with its 151k vocabulary): the GPU check's model.
    c.hidden_size = 1024, c.intermediate_size = 3072, c.num_hidden_layers = 28, c.num_attention_heads = 16, c.num_key_value_heads = 8, c.head_dim = 128;
    c.max_position_embeddings = 40960;
  } else if (size == "4b") {
    // Qwen3-4B's shape (about 4.0B parameters, tied embeddings): the GPU check's larger model (part e).
    c.hidden_size = 2560, c.intermediate_size = 9728, c.num_hidden_layers = 36, c.num_attention_heads = 32, c.num_key_value_heads = 8, c.head_dim = 128;
    c.max_position_embeddings = 40960;
  } else if (size == "30b-a3b" && family == "qwen3_moe") {
    // Qwen3-30B-A3B's shape: 48 layers of 128 experts, 8 routed a token (3.3B active of 30.5B).
    c.hidden_size = 2048, c.intermediate_size = 6144, c.num_hidden_layers = 48, c.num_attention_heads = 32, c.num_key_value_heads = 4, c.head_dim = 128;
    c.num_experts = 128, c.num_experts_per_tok = 8, c.moe_intermediate_size = 768;
    c.max_position_embeddings = 40960;
  } else if (size == "20b" && family == "gpt_oss") {
    // gpt-oss-20b's shape: 24 layers of 32 experts, 4 routed a token (3.6B active of 21B).
    c.hidden_size = 2880, c.intermediate_size = 2880, c.num_hidden_layers = 24, c.num_attention_heads = 64, c.num_key_value_heads = 8, c.head_dim = 64;
    c.num_experts = 32, c.num_experts_per_tok = 4;
    c.max_position_embeddings = 131072;
  } else {
    throw Error(AREAL_CODE_INVALID_ARGUMENT, "--preset must be tiny, tiny-hd32, small, agent, 0.6b, 4b, (qwen3_moe) 30b-a3b or (gpt_oss) 20b, got '" + size + "'");
  }
  if (family == "gpt_oss") {
    // GPT-OSS: every layer routes (top 2 of 8 in the small presets); each
    // expert is intermediate_size wide, a multiple of 32 as vLLM's CPU
    // experts and MXFP4 need; biases everywhere; sinks; even layers slide
    // (over 16 keys in tiny presets, so short test sequences cross the
    // window; 128 as released otherwise); YaRN over 4096 positions.
    if (c.num_experts == 0) c.num_experts = 8, c.num_experts_per_tok = 2, c.intermediate_size = std::max<int64_t>(32, c.intermediate_size / 4);
    c.moe_intermediate_size = c.intermediate_size;
    c.qkv_bias = c.o_bias = c.attention_sinks = c.fused_experts = true;
    c.sliding_window = size == "tiny" || size == "tiny-hd32" ? 16 : 128;
    c.layer_types = alternating_layer_types(c.num_hidden_layers);
    c.rms_norm_eps = 1e-5;
    c.rope_theta = 150000.0;
    c.rope_scaling = gpt_oss_rope();
    c.tie_word_embeddings = false;
    // As released (gpt-oss-20b: 0.9 and off); the small presets train their
    // routers with the balancing loss at HF's usual weight.
    c.output_router_logits = size != "20b";
    c.router_aux_loss_coef = size == "20b" ? 0.9 : 0.001;
    return c;
  }
  // The smaller MoE presets: every layer routes among 8 experts (top 2) of a
  // quarter of the dense width, as Qwen3-MoE's ratios go.
  if (family == "qwen3_moe" && c.num_experts == 0) {
    c.num_experts = 8, c.num_experts_per_tok = 2, c.moe_intermediate_size = c.intermediate_size / 4;
    if (size == "tiny-hd32") c.decoder_sparse_step = 2;  // layer 0 dense, layer 1 experts: both kinds in one model
    c.output_router_logits = true;  // these presets train their routers with the balancing loss (30b-a3b: off, as released)
  }
  c.rms_norm_eps = 1e-6;
  c.rope_theta = family == "llama3" ? 500000.0 : 1000000.0;
  if (family == "llama3")
    c.rope_scaling = {{"factor", 8.0}, {"low_freq_factor", 1.0}, {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 1024}, {"rope_type", "llama3"}};
  // tiny-hd32 is untied: vLLM's reload_weights leaves a tied lm_head stale.
  c.tie_word_embeddings = family != "llama3" && size != "tiny-hd32" && size != "30b-a3b";
  return c;
}

}  // namespace areal::model
