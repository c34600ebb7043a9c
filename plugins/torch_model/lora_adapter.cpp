#include "lora_adapter.hpp"

#include <cmath>
#include <regex>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <torch/utils.h>

#include "core/hf/model_files/safetensors.hpp"
#include "core/plugin_host/error.hpp"
#include "tensor_file.hpp"

namespace areal::torch_model {
namespace {

namespace fs = std::filesystem;
using J = nlohmann::json;

constexpr std::array<LoraModule, kLoraModules> kAll = {LoraModule::kQ,    LoraModule::kK,  LoraModule::kV,   LoraModule::kO,
                                                       LoraModule::kGate, LoraModule::kUp, LoraModule::kDown};

bool module_from_name(const std::string& name, LoraModule& out) {
  for (LoraModule m : kAll)
    if (name == lora_module_name(m)) return out = m, true;
  return false;
}

// target_modules as PEFT reads it: a list of names, each matching a module
// whose path is that name or ends in "." + name ("q_proj", "self_attn.q_proj"),
// or "all-linear". Names that match nothing in this architecture are ignored
// as PEFT ignores them, as long as one matches. A path into one layer
// ("model.layers.0.self_attn.q_proj") is how PEFT saves every adapter's
// targets (one path per layer and module), so a saved config lists them all:
// read as its module (the tensors must then cover every layer, or the load
// names the one missing). In areal's own YAML (layer_paths false) such a
// path would target one layer, which an adapter here cannot: refused.
std::array<bool, kLoraModules> parse_targets(const J& t, const std::string& where, bool* all_linear, bool layer_paths) {
  std::array<bool, kLoraModules> targets{};
  if (t.is_string()) {
    if (t.get<std::string>() != "all-linear")
      throw Error(AREAL_CODE_UNSUPPORTED, where + ": a regular expression ('" + t.get<std::string>() +
                                               "') is not supported; list the modules (q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, "
                                               "down_proj) or say \"all-linear\"");
    targets.fill(true);  // every linear layer but the output head, as PEFT expands it
    *all_linear = true;
    return targets;
  }
  if (!t.is_array() || t.empty()) throw Error(AREAL_CODE_INVALID_ARGUMENT, where + ": must be a non-empty list of module names or \"all-linear\"");
  bool any = false;
  for (const auto& n : t) {
    if (!n.is_string()) throw Error(AREAL_CODE_INVALID_ARGUMENT, where + ": module names must be strings");
    const std::string full = n.get<std::string>();
    static const std::regex kOneLayer(R"(^(base_model\.model\.)?(model\.)?layers\.[0-9]+\.)");
    std::smatch layer_prefix;
    const bool one_layer = std::regex_search(full, layer_prefix, kOneLayer);
    if (one_layer && !layer_paths)
      throw Error(AREAL_CODE_UNSUPPORTED, where + ": '" + full + "' names one layer's module; an adapter here covers every layer (list '" +
                                              full.substr(full.rfind('.') + 1) + "')");
    // Paths of a projection here are model.layers.N.<parent>.<name>: past the
    // layer prefix, the suffixes that match are "<name>" and "<parent>.<name>".
    const std::string rel = one_layer ? full.substr(static_cast<size_t>(layer_prefix.length(0))) : full;
    const auto dot = rel.rfind('.');
    const std::string name = dot == std::string::npos ? rel : rel.substr(dot + 1);
    LoraModule m = LoraModule::kQ;
    if (!module_from_name(name, m) || (dot != std::string::npos && rel != std::string(lora_module_parent(m)) + "." + name)) {
      // matches nothing here, as in PEFT
      continue;
    }
    targets[static_cast<size_t>(m)] = true;
    any = true;
  }
  if (!any)
    throw Error(AREAL_CODE_INVALID_ARGUMENT, where + ": none of " + t.dump() +
                                                 " is a projection of this model (q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj)");
  return targets;
}

std::string peft_key(int64_t layer, LoraModule m, char which) {
  return "base_model.model.model.layers." + std::to_string(layer) + "." + lora_module_parent(m) + "." + lora_module_name(m) + ".lora_" +
         std::string(1, which) + ".weight";
}

}  // namespace

const char* lora_module_name(LoraModule m) {
  static const char* const kNames[] = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};
  return kNames[static_cast<size_t>(m)];
}

const char* lora_module_parent(LoraModule m) { return m <= LoraModule::kO ? "self_attn" : "mlp"; }

std::pair<int64_t, int64_t> lora_module_shape(const model::ModelConfig& c, LoraModule m) {
  const int64_t q = c.num_attention_heads * c.head_dim, kv = c.num_key_value_heads * c.head_dim;
  switch (m) {
    case LoraModule::kQ: return {c.hidden_size, q};
    case LoraModule::kK:
    case LoraModule::kV: return {c.hidden_size, kv};
    case LoraModule::kO: return {q, c.hidden_size};
    case LoraModule::kGate:
    case LoraModule::kUp: return {c.hidden_size, c.intermediate_size};
    case LoraModule::kDown: return {c.intermediate_size, c.hidden_size};
  }
  return {0, 0};
}

namespace {

// A MoE layer's MLP is a router and experts, not one gate/up/down projection.
void refuse_expert_targets(const LoraConfig& c, const model::ModelConfig& model, const std::string& where) {
  if (model.moe_layer_count() == 0) return;
  for (LoraModule m : {LoraModule::kGate, LoraModule::kUp, LoraModule::kDown})
    if (c.targets[static_cast<size_t>(m)])
      throw Error(AREAL_CODE_UNSUPPORTED, where + ": LoRA on the experts of a mixture-of-experts model is not implemented; target the attention "
                                                  "projections (target_modules: [q_proj, k_proj, v_proj, o_proj])");
}

}  // namespace

LoraConfig LoraConfig::from_json(const J& j, const std::string& where) {
  if (!j.is_object()) throw Error(AREAL_CODE_INVALID_ARGUMENT, where + ": must be an object {rank, alpha, dropout, target_modules}");
  LoraConfig c;
  c.rank = j.value("rank", int64_t{8});
  c.alpha = j.value("alpha", 16.0);
  c.dropout = j.value("dropout", 0.0);
  c.use_rslora = j.value("use_rslora", false);
  if (c.rank < 1) throw Error(AREAL_CODE_INVALID_ARGUMENT, where + ".rank: must be at least 1, got " + std::to_string(c.rank));
  if (!(c.alpha > 0)) throw Error(AREAL_CODE_INVALID_ARGUMENT, where + ".alpha: must be positive");
  if (!(c.dropout >= 0 && c.dropout < 1)) throw Error(AREAL_CODE_INVALID_ARGUMENT, where + ".dropout: must be in [0, 1)");
  c.targets = parse_targets(j.contains("target_modules") ? j["target_modules"] : J("all-linear"), where + ".target_modules", &c.all_linear, false);
  return c;
}

LoraConfig LoraConfig::for_model(const model::ModelConfig& model) const {
  LoraConfig c = *this;
  if (!all_linear || model.moe_layer_count() == 0) return c;
  if (model.moe_layer_count() < model.num_hidden_layers)
    throw Error(AREAL_CODE_UNSUPPORTED, "lora: \"all-linear\" on a mixture-of-experts model with dense MLP layers would target those "
                                        "layers' MLPs alone, which an adapter here (one set of modules for every layer) cannot; list the "
                                        "attention projections (target_modules: [q_proj, k_proj, v_proj, o_proj])");
  for (LoraModule m : {LoraModule::kGate, LoraModule::kUp, LoraModule::kDown}) c.targets[static_cast<size_t>(m)] = false;
  return c;
}

double LoraConfig::scaling() const { return use_rslora ? alpha / std::sqrt(static_cast<double>(rank)) : alpha / static_cast<double>(rank); }

LoraAdapter::LoraAdapter(LoraConfig config, size_t layers) : config_(std::move(config)), a_(layers), b_(layers) {}

LoraAdapter LoraAdapter::init(const LoraConfig& requested, const model::ModelConfig& model, uint64_t seed, torch::Device device, torch::Dtype dtype) {
  const LoraConfig config = requested.for_model(model);
  refuse_expert_targets(config, model, "lora");
  LoraAdapter adapter(config, static_cast<size_t>(model.num_hidden_layers));
  torch::manual_seed(seed);
  const auto f32 = torch::TensorOptions().dtype(torch::kFloat32);
  for (int64_t l = 0; l < model.num_hidden_layers; ++l)
    for (LoraModule m : kAll) {
      if (!config.targets[static_cast<size_t>(m)]) continue;
      const auto [in, out] = lora_module_shape(model, m);
      const double bound = 1.0 / std::sqrt(static_cast<double>(in));  // kaiming_uniform_(a=sqrt(5)) on [r, in]
      adapter.a_[static_cast<size_t>(l)][static_cast<size_t>(m)] = (torch::rand({config.rank, in}, f32) * 2 - 1).mul_(bound).to(device, dtype).set_requires_grad(true);
      adapter.b_[static_cast<size_t>(l)][static_cast<size_t>(m)] = torch::zeros({out, config.rank}, f32).to(device, dtype).set_requires_grad(true);
    }
  return adapter;
}

LoraConfig LoraConfig::from_peft_json(const J& j, const std::string& where) {
  if (!j.is_object()) throw Error(AREAL_CODE_INVALID_ARGUMENT, where + ": must be a JSON object (PEFT's adapter_config.json)");
  if (j.value("peft_type", std::string("LORA")) != "LORA")
    throw Error(AREAL_CODE_UNSUPPORTED, where + ": peft_type '" + j.value("peft_type", std::string()) + "' is not LORA");
  // What would change the math and is not implemented: refused by name, never ignored.
  auto refuse_if = [&](const char* key, bool set) {
    if (set) throw Error(AREAL_CODE_UNSUPPORTED, where + ": '" + key + "' = " + j[key].dump() + " is not supported");
  };
  auto non_empty = [&](const char* key) { return j.contains(key) && !j[key].is_null() && !j[key].empty(); };
  refuse_if("use_dora", j.value("use_dora", false));
  refuse_if("fan_in_fan_out", j.value("fan_in_fan_out", false));
  refuse_if("bias", j.contains("bias") && j["bias"] != "none");
  refuse_if("lora_bias", j.value("lora_bias", false));
  refuse_if("rank_pattern", non_empty("rank_pattern"));
  refuse_if("alpha_pattern", non_empty("alpha_pattern"));
  refuse_if("layers_to_transform", j.contains("layers_to_transform") && !j["layers_to_transform"].is_null());
  refuse_if("modules_to_save", non_empty("modules_to_save"));
  refuse_if("exclude_modules", non_empty("exclude_modules"));
  // aLoRA applies the adapter only from its invocation tokens on; PiSSA,
  // OLoRA, CorDA and LoftQ adapters saved unconverted rewrite the base
  // weights when PEFT loads them (vLLM refuses both too).
  refuse_if("alora_invocation_tokens", j.contains("alora_invocation_tokens") && !j["alora_invocation_tokens"].is_null());
  if (j.contains("init_lora_weights") && j["init_lora_weights"].is_string()) {
    const std::string init = j["init_lora_weights"].get<std::string>();
    refuse_if("init_lora_weights", init.rfind("pissa", 0) == 0 || init == "olora" || init == "corda" || init == "loftq");
  }
  LoraConfig c;
  if (!j.contains("r") || !j["r"].is_number_integer() || j["r"].get<int64_t>() < 1) throw Error(AREAL_CODE_INVALID_ARGUMENT, where + ": 'r' must be a positive integer");
  c.rank = j["r"].get<int64_t>();
  c.alpha = j.contains("lora_alpha") && j["lora_alpha"].is_number() ? j["lora_alpha"].get<double>() : 8.0;  // PEFT's default
  c.dropout = j.contains("lora_dropout") && j["lora_dropout"].is_number() ? j["lora_dropout"].get<double>() : 0.0;
  c.use_rslora = j.value("use_rslora", false);
  if (!j.contains("target_modules") || j["target_modules"].is_null()) throw Error(AREAL_CODE_INVALID_ARGUMENT, where + ": 'target_modules' is missing");
  c.targets = parse_targets(j["target_modules"], where + ": target_modules", &c.all_linear, true);
  return c;
}

LoraAdapter LoraAdapter::from_tensors(const LoraConfig& requested, const model::ModelConfig& model, const std::map<std::string, torch::Tensor>& tensors,
                                      const std::string& where, torch::Device device, torch::Dtype dtype) {
  const LoraConfig c = requested.for_model(model);
  refuse_expert_targets(c, model, where);
  LoraAdapter adapter(c, static_cast<size_t>(model.num_hidden_layers));
  size_t used = 0;
  for (int64_t l = 0; l < model.num_hidden_layers; ++l)
    for (LoraModule m : kAll) {
      if (!c.targets[static_cast<size_t>(m)]) continue;
      const auto [in_features, out_features] = lora_module_shape(model, m);
      for (const char which : {'A', 'B'}) {
        const std::string key = peft_key(l, m, which);
        const auto it = tensors.find(key);
        if (it == tensors.end()) throw Error(AREAL_CODE_INVALID_ARGUMENT, where + ": tensor '" + key + "' is missing (target_modules names " + lora_module_name(m) + ")");
        const std::vector<int64_t> want = which == 'A' ? std::vector<int64_t>{c.rank, in_features} : std::vector<int64_t>{out_features, c.rank};
        if (it->second.sizes() != c10::IntArrayRef(want))
          throw Error(AREAL_CODE_INVALID_ARGUMENT, where + ": tensor '" + key + "' has shape " + J(it->second.sizes().vec()).dump() + ", this model needs " + J(want).dump());
        auto& slot = which == 'A' ? adapter.a_[static_cast<size_t>(l)][static_cast<size_t>(m)] : adapter.b_[static_cast<size_t>(l)][static_cast<size_t>(m)];
        slot = it->second.to(device, dtype, /*non_blocking=*/false, /*copy=*/true).set_requires_grad(true);
        ++used;
      }
    }
  if (used != tensors.size()) {
    for (const auto& [name, t] : tensors) {
      bool known = false;
      for (int64_t l = 0; l < model.num_hidden_layers && !known; ++l)
        for (LoraModule m : kAll)
          if (c.targets[static_cast<size_t>(m)] && (name == peft_key(l, m, 'A') || name == peft_key(l, m, 'B'))) known = true;
      if (!known)
        throw Error(AREAL_CODE_INVALID_ARGUMENT, where + ": tensor '" + name + "' belongs to no targeted module of this model" +
                                                     (name.find(".default.") != std::string::npos ? " (keys must not carry the adapter name '.default.')" : ""));
    }
  }
  return adapter;
}

LoraAdapter LoraAdapter::load(const std::string& dir, const model::ModelConfig& model, torch::Device device, torch::Dtype dtype) {
  const fs::path cfg_path = fs::path(dir) / "adapter_config.json";
  std::ifstream in(cfg_path);
  if (!in) throw Error(AREAL_CODE_NOT_FOUND, cfg_path.string() + ": cannot read (is '" + dir + "' a PEFT adapter folder?)");
  J j;
  try {
    j = J::parse(in);
  } catch (const J::exception& e) {
    throw Error(AREAL_CODE_INVALID_ARGUMENT, cfg_path.string() + ": not JSON: " + e.what());
  }
  const LoraConfig c = LoraConfig::from_peft_json(j, cfg_path.string());
  const fs::path weights = fs::path(dir) / "adapter_model.safetensors";
  if (!fs::exists(weights))
    throw Error(AREAL_CODE_NOT_FOUND, weights.string() + ": missing" + (fs::exists(fs::path(dir) / "adapter_model.bin") ? " (adapter_model.bin, pickle, is not read: save with safe_serialization)" : ""));
  const model::SafetensorsFile file = model::SafetensorsFile::load(weights.string());
  std::map<std::string, torch::Tensor> tensors;
  for (const auto& t : file.tensors()) tensors[t.name] = tensor_from_file(t, file.data(t), dtype);
  return from_tensors(c, model, tensors, weights.string(), device, dtype);
}

J LoraAdapter::peft_config(const std::string& base_model) const {
  J targets = J::array();
  for (LoraModule m : kAll)
    if (config_.targets[static_cast<size_t>(m)]) targets.push_back(lora_module_name(m));
  return {{"peft_type", "LORA"},        {"task_type", "CAUSAL_LM"},     {"base_model_name_or_path", base_model},
          {"r", config_.rank},          {"lora_alpha", config_.alpha},  {"lora_dropout", config_.dropout},
          {"target_modules", targets},  {"use_rslora", config_.use_rslora}, {"use_dora", false},
          {"bias", "none"},             {"fan_in_fan_out", false},      {"init_lora_weights", true},
          {"inference_mode", true},     {"modules_to_save", nullptr},   {"layers_to_transform", nullptr},
          {"rank_pattern", J::object()}, {"alpha_pattern", J::object()}};
}

std::vector<std::pair<std::string, torch::Tensor>> LoraAdapter::named_tensors() const {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (size_t l = 0; l < a_.size(); ++l)
    for (LoraModule m : kAll) {
      if (!config_.targets[static_cast<size_t>(m)]) continue;
      out.emplace_back(peft_key(static_cast<int64_t>(l), m, 'A'), a_[l][static_cast<size_t>(m)]);
      out.emplace_back(peft_key(static_cast<int64_t>(l), m, 'B'), b_[l][static_cast<size_t>(m)]);
    }
  return out;
}

void LoraAdapter::save(const std::string& dir, const std::string& base_model) const {
  fs::create_directories(dir);
  model::SafetensorsWriter writer;
  for (const auto& [key, tensor] : named_tensors()) {
    const torch::Tensor t = tensor.detach().to(torch::kCPU, torch::kFloat32).contiguous();
    writer.add(key, model::DType::kF32, {t.size(0), t.size(1)}, t.data_ptr(), static_cast<size_t>(t.numel()) * sizeof(float));
  }
  // Written beside, then renamed: a reader never sees half a folder's file.
  const fs::path tmp = fs::path(dir) / "adapter_model.safetensors.tmp";
  writer.save(tmp.string());
  fs::rename(tmp, fs::path(dir) / "adapter_model.safetensors");
  std::ofstream(fs::path(dir) / "adapter_config.json") << peft_config(base_model).dump(2) << "\n";
}

std::vector<torch::Tensor> LoraAdapter::parameters() const {
  std::vector<torch::Tensor> out;
  for (size_t l = 0; l < a_.size(); ++l)
    for (size_t m = 0; m < kLoraModules; ++m)
      if (a_[l][m].defined()) out.push_back(a_[l][m]), out.push_back(b_[l][m]);
  return out;
}

torch::Tensor LoraAdapter::merged(const std::string& weight_name, const torch::Tensor& w, std::optional<torch::ScalarType> dtype) const {
  const torch::Tensor base = w.detach();
  const torch::ScalarType out = dtype.value_or(w.scalar_type());
  const std::string layers = "model.layers.";
  if (weight_name.rfind(layers, 0) != 0) return base.to(out);
  const size_t dot = weight_name.find('.', layers.size());
  const int64_t layer = std::stoll(weight_name.substr(layers.size(), dot - layers.size()));
  if (layer < 0 || static_cast<size_t>(layer) >= a_.size()) return base.to(out);
  for (LoraModule m : kAll) {
    const std::string suffix = std::string(".") + lora_module_parent(m) + "." + lora_module_name(m) + ".weight";
    if (!a(layer, m).defined() || weight_name.compare(dot, std::string::npos, suffix) != 0) continue;
    torch::NoGradGuard no_grad;
    const torch::Tensor delta = torch::matmul(b(layer, m), a(layer, m)) * config_.scaling();
    return (base.to(delta.scalar_type()) + delta).to(out);
  }
  return base.to(out);
}

torch::Tensor LoraAdapter::delta(int64_t layer, LoraModule m, const torch::Tensor& x) const {
  const torch::Tensor& a = this->a(layer, m);
  if (!a.defined()) return {};
  torch::Tensor in = x.to(a.scalar_type());  // PEFT casts the input to the adapter's dtype
  if (training_ && config_.dropout > 0) in = torch::dropout(in, config_.dropout, /*train=*/true);
  return (torch::linear(torch::linear(in, a), this->b(layer, m)) * config_.scaling()).to(x.scalar_type());
}

}  // namespace areal::torch_model
