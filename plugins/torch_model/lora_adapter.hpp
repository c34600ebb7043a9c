// A LoRA adapter of a DecoderModel (issue #34): for each targeted linear
// projection W of each layer, two float32 matrices A [r, in] and B [out, r],
// and the projection computes W x + (alpha / r) * B (A x) (alpha / sqrt(r)
// with rsLoRA), as Hugging Face PEFT's LoRA layers do. The base weights stay
// as they are: training updates only A and B, serving adds the low-rank term.
//
// Files are PEFT's: adapter_config.json and adapter_model.safetensors with
// keys base_model.model.model.layers.{N}.{self_attn|mlp}.{module}.lora_{A|B}.weight,
// so PEFT, vLLM and users' tools read what we write and we read theirs.
// Supported from PEFT's LoraConfig: r, lora_alpha, lora_dropout,
// target_modules (a list of the names below, or "all-linear"), use_rslora;
// anything that changes the math (DoRA, biases, rank/alpha patterns, a regex
// target, layers_to_transform, modules_to_save) is refused with its name.
#pragma once

#include <array>
#include <map>
#include <optional>
#include <utility>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/types.h>

#include "core/hf/model_files/model_config.hpp"

namespace areal::torch_model {

// The projections LoRA can target, by PEFT's names.
enum class LoraModule : uint8_t { kQ, kK, kV, kO, kGate, kUp, kDown };
constexpr size_t kLoraModules = 7;
const char* lora_module_name(LoraModule m);  // "q_proj", ...
const char* lora_module_parent(LoraModule m);  // "self_attn" or "mlp"

struct LoraConfig {
  int64_t rank = 8;
  double alpha = 16;
  double dropout = 0;
  bool use_rslora = false;
  std::array<bool, kLoraModules> targets{};  // which modules carry an adapter
  bool all_linear = false;                     // targets came from "all-linear" (narrowed per model: see for_model)

  // From areal's YAML ({rank, alpha, dropout, target_modules, use_rslora};
  // target_modules a list of names or "all-linear"). Throws INVALID_ARGUMENT
  // naming `where` and the key.
  static LoraConfig from_json(const nlohmann::json& j, const std::string& where);
  // From PEFT's adapter_config.json fields (r, lora_alpha, lora_dropout,
  // target_modules, use_rslora); what would change the math (DoRA, biases,
  // patterns, ...) is UNSUPPORTED by name. `where` names the source in errors.
  static LoraConfig from_peft_json(const nlohmann::json& j, const std::string& where);
  double scaling() const;
  // The targets on `model`: "all-linear" on a mixture-of-experts model is its
  // attention projections (its MLPs are routers and experts, which PEFT does
  // not count as linear layers either).
  LoraConfig for_model(const model::ModelConfig& model) const;
};

class LoraAdapter {
 public:
  // A fresh adapter as PEFT initialises one: A uniform in +-1/sqrt(in)
  // (nn.Linear's Kaiming init), B zero, so it starts as the base model.
  // Drawn on the CPU from `seed`, then moved to `device`.
  static LoraAdapter init(const LoraConfig& config, const model::ModelConfig& model, uint64_t seed, torch::Device device = torch::kCPU,
                          torch::Dtype dtype = torch::kFloat32);
  // A PEFT adapter folder (adapter_config.json + adapter_model.safetensors)
  // for a model of `model`'s shape. Throws NOT_FOUND / INVALID_ARGUMENT /
  // UNSUPPORTED naming the folder and the field or tensor.
  // Adapters are float32 (PEFT's default); float64 for exact tests.
  static LoraAdapter load(const std::string& dir, const model::ModelConfig& model, torch::Device device = torch::kCPU,
                          torch::Dtype dtype = torch::kFloat32);
  // From tensors by PEFT's keys (base_model.model.model.layers.N.self_attn.q_proj.lora_A.weight):
  // every targeted module's A and B and nothing else, shapes checked,
  // copied to `device` in `dtype`. Throws INVALID_ARGUMENT naming `where`.
  static LoraAdapter from_tensors(const LoraConfig& config, const model::ModelConfig& model, const std::map<std::string, torch::Tensor>& tensors,
                                  const std::string& where, torch::Device device = torch::kCPU, torch::Dtype dtype = torch::kFloat32);
  // Writes the folder in PEFT's format (float32 tensors); `base_model`
  // goes to base_model_name_or_path.
  void save(const std::string& dir, const std::string& base_model) const;

  const LoraConfig& config() const { return config_; }
  // PEFT's adapter_config.json for it (base_model_name_or_path = base_model).
  nlohmann::json peft_config(const std::string& base_model) const;
  // Every A and B by PEFT's key, layer by layer (the tensors themselves, not copies).
  std::vector<std::pair<std::string, torch::Tensor>> named_tensors() const;
  // A [r, in] and B [out, r] of a layer's module; undefined when not targeted.
  const torch::Tensor& a(int64_t layer, LoraModule m) const { return a_[static_cast<size_t>(layer)][static_cast<size_t>(m)]; }
  const torch::Tensor& b(int64_t layer, LoraModule m) const { return b_[static_cast<size_t>(layer)][static_cast<size_t>(m)]; }
  std::vector<torch::Tensor> parameters() const;  // every A and B, layer by layer, module by module
  // Dropout on the adapter's input applies only while training.
  void set_training(bool training) { training_ = training; }
  // Whether delta() draws random numbers (dropout while training): a
  // recomputed layer must then replay the generator's state.
  bool draws_random() const { return training_ && config_.dropout > 0; }

  // scaling * B (A dropout(x)) in x's dtype, computed in the adapter's
  // (float32); undefined when the module is not targeted.
  torch::Tensor delta(int64_t layer, LoraModule m, const torch::Tensor& x) const;
  // The base weight of that HF name with the adapter merged in
  // (W + scaling * B A, no autograd), in `dtype` (default: W's); W itself
  // when no adapter targets it. For handing the engine a plain model (in
  // its dtype), or writing one (float32: a bf16 sum would round small
  // updates away).
  torch::Tensor merged(const std::string& weight_name, const torch::Tensor& w, std::optional<torch::ScalarType> dtype = std::nullopt) const;

 private:
  LoraAdapter(LoraConfig config, size_t layers);
  LoraConfig config_;
  std::vector<std::array<torch::Tensor, kLoraModules>> a_, b_;
  bool training_ = false;
};

// The input and output sizes of a module's projection in a model of this shape.
std::pair<int64_t, int64_t> lora_module_shape(const model::ModelConfig& model, LoraModule m);

}  // namespace areal::torch_model
