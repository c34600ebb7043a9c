#include "config_loading.hpp"

#include <filesystem>
#include <iostream>
#include <exception>

#include "core/config/config_loader.hpp"
#include "core/plugin_host/error.hpp"
#include "core/telemetry/logging.hpp"

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

bool report_config_errors(const std::string& path, const ResolvedConfig& rc) {
  if (rc.errors.empty()) return false;
  for (const auto& e : rc.errors) std::cerr << path << ": " << e << "\n";
  std::cerr << "areal-host: the config has " << rc.errors.size() << " problem(s); nothing was started\n";
  return true;
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

std::string resolve_gateway_state_dir(const ResolvedConfig& rc, Json& gw, bool durable, bool fresh_training_run) {
  namespace fs = std::filesystem;
  std::string dir = gw.value("state_dir", std::string("auto"));
  const bool router = gw.contains("workers") && gw["workers"].is_array() && !gw["workers"].empty();
  if (dir == "auto") dir = durable && !router ? rc.path(rc.host.run_dir_relative() + "/gateway_state") : "none";
  else if (dir != "none" && !dir.empty()) dir = rc.path(dir);
  if (dir.empty() || dir == "none") {
    gw["state_dir"] = "none";
    return "";
  }
  gw["state_dir"] = dir;
  std::error_code ec;
  if (fresh_training_run && fs::exists(fs::path(dir) / "gateway_state.sqlite3", ec)) {
    // A new run must not train on the last run's sessions; they are kept, not deleted.
    const fs::path previous = fs::path(dir).string() + ".previous";
    fs::remove_all(previous, ec);
    fs::rename(dir, previous, ec);
    if (ec) throw Error(AREAL_CODE_FAILED_PRECONDITION, "cannot move the previous run's gateway state " + dir + " aside: " + ec.message());
    logging::get("gateway")->warn("trainer.resume is false: the previous run's gateway state moved to {} (set trainer.resume=true to continue it)",
                                  previous.string());
  }
  return dir;
}

}  // namespace areal::host
