// Shared by `run` and `check-config`: read the YAML, apply overrides,
// resolve plugins and validate everything.
#pragma once

#include <string>
#include <vector>

#include "core/config/run_config.hpp"

namespace areal::host {

// Never throws for config mistakes: they land in ResolvedConfig::errors.
ResolvedConfig load_config(const std::string& path, const std::vector<std::string>& overrides);

// The same without a file: defaults plus overrides (relative paths: the CWD).
ResolvedConfig resolve_config_from_overrides(const std::vector<std::string>& overrides);

}  // namespace areal::host
