// The `local` inference plugin, loaded from the build's plugin folder and
// created with a config, for tests that drive it through its ABI table.
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "core/plugin_host/plugin_catalog.hpp"
#include "core/plugin_host/plugin_instance.hpp"

namespace areal::testing {

struct LocalEngine {
  areal::PluginCatalog catalog{{AREAL_TEST_PLUGIN_DIR}};
  std::shared_ptr<areal::LoadedPlugin> plugin = catalog.resolve("local", AREAL_KIND_INFERENCE);
  std::string name = "test";
  areal_services services = areal::make_services(name);
  areal::PluginInstance instance;
  explicit LocalEngine(const nlohmann::json& config) : instance(plugin, config.dump(), &services) {}
  const areal_inference_vtable& vt() const { return *plugin->inference(); }
};

}  // namespace areal::testing
