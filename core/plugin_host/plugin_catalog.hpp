// Finding plugins by name or path.
//
// Search order for a name N (file libareal-N.so):
//   1. built-in plugins (the gateway),
//   2. each directory in $AREAL_PLUGIN_PATH (colon-separated),
//   3. each directory in the config's plugins.search_paths,
//   4. <directory of areal-host>/../lib/areal/plugins (build and install trees).
// A value containing '/' or ending in ".so" is a path, relative to base_dir.
#pragma once

#include <memory>
#include <string>
#include <vector>
#include <cstdint>

#include "core/plugin_host/plugin_loader.hpp"

namespace areal {

class PluginCatalog {
 public:
  explicit PluginCatalog(std::vector<std::string> config_dirs = {});

  std::vector<std::string> search_dirs() const;

  // Resolves and loads. `expected_kind` 0 accepts any kind. Throws
  // areal::Error: NOT_FOUND listing where it looked (with the nearest name),
  // or the loader's refusal, or a kind mismatch.
  std::shared_ptr<LoadedPlugin> resolve(const std::string& name_or_path, int32_t expected_kind = 0,
                                        const std::string& base_dir = ".") const;

  // Every plugin file in the search dirs plus the built-ins. Files that fail
  // to load are reported in `errors` ("<path>: <reason>"), not thrown.
  std::vector<std::shared_ptr<LoadedPlugin>> load_all(std::vector<std::string>& errors) const;

  // The names of plugin files found (without loading them).
  std::vector<std::string> available_names() const;

 private:
  std::vector<std::string> config_dirs_;
};

// The directory holding the running executable.
std::string executable_dir();

}  // namespace areal
