#include <iostream>
#include <string>

#include "../config_loading.hpp"
#include "commands.hpp"

namespace areal::host {

int check_config(const CommandLine& cl) {
  std::string path = cl.flags.count("config") ? cl.flags.at("config") : (cl.positional.empty() ? "" : cl.positional[0]);
  if (path.empty()) {
    std::cerr << "areal-host check-config: give a config file: areal-host check-config FILE.yaml [key=value ...]\n";
    return 2;
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
