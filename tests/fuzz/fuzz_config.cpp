// Fuzz target: YAML config and dotted overrides. Input: YAML text, then
// lines after a NUL byte, each a "key.path=value" override; the result is
// validated against the full schema as `areal-host run` does (plugins by
// built-in name only: a path would be loaded). Mistakes must be reported
// (areal::Error, or a listed config error), never crash.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

#include "core/config/config_loader.hpp"
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
    // A plugin named by path would be dlopen()ed: the harness keeps to built-in names.
    if (raw.is_object())
      for (auto& [section, value] : raw.items())
        if (value.is_object() && value.contains("plugin") && value["plugin"].is_string() &&
            value["plugin"].get<std::string>().find_first_of("/.") != std::string::npos)
          value.erase("plugin");
    areal::resolve_config(std::move(raw), "/nonexistent-base");
  } catch (const areal::Error&) {
  }
  return 0;
}
