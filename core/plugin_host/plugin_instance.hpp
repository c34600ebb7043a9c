// One live plugin instance: create on construction, destroy on destruction.
#pragma once

#include <memory>
#include <string>

#include "core/plugin_host/plugin_loader.hpp"

namespace areal {

class PluginInstance {
 public:
  // Calls the kind's create with the section's JSON. Throws areal::Error
  // "<instance_name> (<plugin>): <plugin's message>" on failure. `services`
  // must outlive the instance.
  PluginInstance(std::shared_ptr<LoadedPlugin> plugin, const std::string& config_json, const areal_services* services);
  ~PluginInstance();
  PluginInstance(const PluginInstance&) = delete;
  PluginInstance& operator=(const PluginInstance&) = delete;

  void* self() const { return self_; }
  const LoadedPlugin& plugin() const { return *plugin_; }
  const std::string& label() const { return label_; }

 private:
  std::shared_ptr<LoadedPlugin> plugin_;  // keeps the library mapped while we live
  void* self_ = nullptr;
  std::string label_;
};

// Builds the services struct for an instance. Fields that reference other
// instances stay NULL unless set by the caller.
areal_services make_services(const std::string& instance_name_storage);

}  // namespace areal
