#include <iomanip>
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/plugin_host/plugin_catalog.hpp"
#include "core/config/run_config.hpp"
#include "commands.hpp"

namespace areal::host {

int list_plugins(const CommandLine& cl) {
  PluginCatalog catalog;
  std::vector<std::string> errors;
  auto plugins = catalog.load_all(errors);
  if (cl.flags.count("json")) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& p : plugins)
      out.push_back({{"kind", kind_name(p->kind())}, {"name", p->name()}, {"version", p->version()},
                     {"abi", p->abi_version()}, {"path", p->path()}, {"description", p->info().description}});
    std::cout << out.dump(2) << "\n";
  } else {
    std::cout << std::left << std::setw(11) << "KIND" << std::setw(18) << "NAME" << std::setw(10) << "VERSION"
              << std::setw(6) << "ABI" << "PATH\n";
    for (const auto& p : plugins)
      std::cout << std::setw(11) << kind_name(p->kind()) << std::setw(18) << p->name() << std::setw(10) << p->version()
                << std::setw(6) << p->abi_version() << p->path() << "\n";
  }
  for (const auto& e : errors) std::cerr << "refused: " << e << "\n";
  return errors.empty() ? 0 : 1;
}

int config_reference(const CommandLine&) {
  std::cout << configuration_reference(PluginCatalog());
  return 0;
}

}  // namespace areal::host
