// Fuzz target: YAML config and dotted overrides. Input: YAML text, then
// lines after a NUL byte, each a "key.path=value" override. The result is
// validated against the host's schema and read into HostSettings, as
// `areal-host run` does before it loads any plugin (loading plugins, each a
// dlopen, would unload coverage counters under libFuzzer; the plugin
// sections go through the same schema validator). Mistakes must be
// reported (areal::Error, or a listed config error), never crash.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "core/config/config_loader.hpp"
#include "core/config/config_schema.hpp"
#include "core/config/run_config.hpp"
#include "core/plugin_host/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  try {
    areal::Json raw = areal::config::yaml_to_json(input.substr(0, nul), "fuzz.yaml");
    if (nul != std::string::npos) {
      std::istringstream lines(input.substr(nul + 1));
      for (std::string line; std::getline(lines, line);) areal::config::apply_override(raw, line);
    }
    if (!raw.is_object()) return 0;
    for (const auto& s : areal::plugin_sections()) raw.erase(s.name);
    std::vector<std::string> errors;
    areal::config::validate(areal::host_schema(), raw, "", errors);
    if (errors.empty()) areal::HostSettings::read(raw);
  } catch (const areal::Error&) {
  }
  return 0;
}
