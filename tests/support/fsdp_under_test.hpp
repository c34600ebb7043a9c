// The fsdp train plugin from the build's plugin folder, with the services
// its instances get: the torch tests' set-up for driving it through the ABI.
#pragma once

#include <memory>
#include <string>

#include "core/plugin_host/plugin_catalog.hpp"
#include "core/plugin_host/plugin_instance.hpp"

namespace areal::testing {

struct FsdpUnderTest {
  areal::PluginCatalog catalog{{AREAL_TEST_PLUGIN_DIR}};
  std::shared_ptr<areal::LoadedPlugin> plugin = catalog.resolve("fsdp", AREAL_KIND_TRAIN);
  std::string name = "train";
  areal_services services = areal::make_services(name);
};

}  // namespace areal::testing
