#include "plugins/gateway/proxy/adapter_names.hpp"

#include <nlohmann/json.hpp>

#include "core/plugin_host/error.hpp"

namespace areal::proxy {

bool AdapterNames::backend_serves_adapters() const {
  return inference_ != nullptr && inference_->vtable != nullptr &&
         inference_->vtable->struct_size >= AREAL_OFFSET_OF_END(areal_inference_vtable, unload_adapter) &&
         inference_->vtable->load_adapter != nullptr;
}

void AdapterNames::refresh_locked() {
  refreshed_ = std::chrono::steady_clock::now();
  ever_refreshed_ = true;
  std::string text;
  areal_writer w{AREAL_OFFSET_OF_END(areal_writer, write), &text, [](void* ctx, areal_str chunk) -> areal_status* {
                   static_cast<std::string*>(ctx)->append(chunk.data, chunk.size);
                   return nullptr;
                 }};
  if (areal_status* st = inference_->vtable->info(inference_->self, &w)) {
    warn_if_status(st, "inference info (adapter names)");
    return;  // keep the names known so far
  }
  const nlohmann::json info = nlohmann::json::parse(text, nullptr, false);
  if (!info.is_object() || !info.value("adapters", false) || !info.contains("loaded_adapters") || !info["loaded_adapters"].is_array()) return;
  names_.clear();
  for (const auto& a : info["loaded_adapters"])
    if (a.is_object() && a.contains("name") && a["name"].is_string()) names_.insert(a["name"].get<std::string>());
}

std::string AdapterNames::adapter_for(const std::string& model) {
  if (model.empty() || !backend_serves_adapters()) return "";
  std::lock_guard<std::mutex> lock(mutex_);
  // Read again on a hit too: an adapter unloaded since must fall back to the
  // base model, not fail every later request naming it.
  if (!ever_refreshed_ || std::chrono::steady_clock::now() - refreshed_ > std::chrono::seconds(1)) refresh_locked();
  return names_.count(model) ? model : "";
}

std::vector<std::string> AdapterNames::loaded() {
  if (!backend_serves_adapters()) return {};
  std::lock_guard<std::mutex> lock(mutex_);
  refresh_locked();
  return {names_.begin(), names_.end()};
}

}  // namespace areal::proxy
