#include "adapter_registry.hpp"

#include <exception>
#include <utility>
#include <vector>

#include "areal/sdk.hpp"
#include "areal/sdk_json.hpp"
#include "float_tensor_view.hpp"

namespace areal::local_inference {

namespace sdk = areal::sdk;
using nlohmann::json;

void AdapterRegistry::load(std::string_view spec_text, const areal_tensor_map* tensors) {
  const json spec = sdk::parse_object(spec_text, "load_adapter: spec");
  if (!spec.contains("name") || !spec["name"].is_string() || spec["name"].get<std::string>().empty())
    throw sdk::invalid_argument("load_adapter: 'name' (a non-empty string) is required");
  if (!spec.contains("version") || !spec["version"].is_number_integer())
    throw sdk::invalid_argument("load_adapter: integer 'version' is required");
  if (spec.contains("default") && !spec["default"].is_boolean()) throw sdk::invalid_argument("load_adapter: 'default' must be a boolean");
  const bool is_default = spec.value("default", false);
  auto served = std::make_shared<ServedAdapter>();
  served->name = spec["name"].get<std::string>();
  served->version = spec["version"].get<int64_t>();
  const bool has_tensors = tensors != nullptr && tensors->count > 0;
  try {
    if (spec.contains("path")) {
      if (!spec["path"].is_string()) throw sdk::invalid_argument("load_adapter: 'path' must be a string");
      if (has_tensors) throw sdk::invalid_argument("load_adapter: give 'path' or tensors with 'config', not both");
      served->source = spec["path"].get<std::string>();
      served->lora = std::make_shared<const torch_model::LoraAdapter>(torch_model::LoraAdapter::load(served->source, model_, device_));
    } else if (spec.contains("config")) {
      if (!has_tensors) throw sdk::invalid_argument("load_adapter: 'config' comes with the adapter's tensors, and none were given");
      const auto config = torch_model::LoraConfig::from_peft_json(spec["config"], "load_adapter: config");
      std::map<std::string, torch::Tensor> by_name;
      for (size_t i = 0; i < tensors->count; ++i) {
        const std::string name(sdk::view(tensors->names[i]));
        by_name[name] = float_tensor_view(*tensors->tensors[i], "load_adapter: tensor '" + name + "'");
      }
      served->source = "memory";
      served->lora = std::make_shared<const torch_model::LoraAdapter>(
          torch_model::LoraAdapter::from_tensors(config, model_, by_name, "load_adapter '" + served->name + "'", device_));
    } else {
      throw sdk::invalid_argument("load_adapter: the spec needs 'path' (a PEFT adapter folder) or 'config' with the tensors");
    }
  } catch (const sdk::Error&) {
    throw;
  } catch (const std::exception& e) {  // a torch error reading or copying: the caller's data
    throw sdk::invalid_argument(std::string("load_adapter '") + served->name + "': " + e.what());
  }
  for (const auto& t : served->lora->parameters()) const_cast<torch::Tensor&>(t).set_requires_grad(false);  // served, never trained here
  std::lock_guard<std::mutex> lock(mutex_);
  if (is_default) default_ = served->name;
  else if (default_ == served->name) default_.clear();
  adapters_[served->name] = std::move(served);
}

void AdapterRegistry::unload(std::string_view name) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (adapters_.erase(std::string(name)) == 0) throw sdk::not_found("unload_adapter: no adapter '" + std::string(name) + "' is loaded");
  if (default_ == name) default_.clear();
}

std::string AdapterRegistry::default_name() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return default_;
}

std::shared_ptr<const ServedAdapter> AdapterRegistry::find(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = adapters_.find(name);
  return it == adapters_.end() ? nullptr : it->second;
}

json AdapterRegistry::describe() const {
  std::lock_guard<std::mutex> lock(mutex_);
  json out = json::array();
  for (const auto& [name, a] : adapters_) {
    const auto& c = a->lora->config();
    json targets = json::array();
    for (size_t m = 0; m < torch_model::kLoraModules; ++m)
      if (c.targets[m]) targets.push_back(torch_model::lora_module_name(static_cast<torch_model::LoraModule>(m)));
    out.push_back({{"name", name}, {"version", a->version}, {"rank", c.rank}, {"alpha", c.alpha}, {"use_rslora", c.use_rslora},
                   {"target_modules", targets}, {"source", a->source}, {"default", name == default_}});
  }
  return out;
}

}  // namespace areal::local_inference
