#include "config_loading.hpp"

#include <filesystem>

#include "core/config/config_loader.hpp"

namespace areal::host {

ResolvedConfig load_config(const std::string& path, const std::vector<std::string>& overrides) {
  Json raw;
  try {
    raw = config::load_yaml_file(path);
    for (const auto& o : overrides) config::apply_override(raw, o);
  } catch (const std::exception& e) {
    ResolvedConfig rc;
    rc.errors.push_back(e.what());
    return rc;
  }
  const std::string base_dir = std::filesystem::absolute(path).parent_path().lexically_normal().string();
  return resolve_config(std::move(raw), base_dir);
}

ResolvedConfig resolve_config_from_overrides(const std::vector<std::string>& overrides) {
  Json raw = Json::object();
  try {
    for (const auto& o : overrides) config::apply_override(raw, o);
  } catch (const std::exception& e) {
    ResolvedConfig rc;
    rc.errors.push_back(e.what());
    return rc;
  }
  return resolve_config(std::move(raw), std::filesystem::current_path().string());
}

}  // namespace areal::host
