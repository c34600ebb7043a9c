#include <exception>
#include <iostream>
#include <string>

#include "../config_loading.hpp"
#include "../service/service_settings.hpp"
#include "core/config/config_loader.hpp"
#include "commands.hpp"

namespace areal::host {

namespace {

// A managed-service file (a top-level `service:` section): its own keys,
// then every base model's job template as the run config it is.
int check_service_file(const std::string& path) {
  service::ServiceSettings s;
  try {
    s = service::load_service_settings(path);
  } catch (const std::exception& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
  int problems = 0;
  for (const auto& [model, template_path] : s.models) {
    const ResolvedConfig rc = load_config(template_path, {});
    for (const auto& e : rc.errors) std::cerr << template_path << " (service.models." << model << "): " << e << "\n";
    problems += static_cast<int>(rc.errors.size());
  }
  if (problems > 0) {
    std::cerr << path << ": " << problems << " problem(s) in its job templates\n";
    return 1;
  }
  std::cerr << path << ": OK (a service file; " << s.models.size() << " job template(s) validate)\n";
  return 0;
}

}  // namespace

int check_config(const CommandLine& cl) {
  std::string path = cl.flags.count("config") ? cl.flags.at("config") : (cl.positional.empty() ? "" : cl.positional[0]);
  if (path.empty()) {
    std::cerr << "areal-host check-config: give a config file: areal-host check-config FILE.yaml [key=value ...]\n";
    return 2;
  }
  try {
    const Json raw = config::load_yaml_file(path);
    if (raw.is_object() && raw.contains("service") && cl.overrides.empty()) return check_service_file(path);
  } catch (const std::exception&) {
    // load_config below reports it with the file's name
  }
  ResolvedConfig rc = load_config(path, cl.overrides);
  if (!rc.errors.empty()) {
    for (const auto& e : rc.errors) std::cerr << path << ": " << e << "\n";
    std::cerr << path << ": " << rc.errors.size() << " problem(s)\n";
    return 1;
  }
  std::cout << rc.effective.dump(2) << "\n";
  std::cerr << path << ": OK\n";
  return 0;
}

}  // namespace areal::host
