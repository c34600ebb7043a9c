// Shared by `run` and `check-config`: read the YAML, apply overrides,
// resolve plugins and validate everything.
#pragma once

#include <string>
#include <vector>

#include "core/config/run_config.hpp"

namespace areal::host {

// Never throws for config mistakes: they land in ResolvedConfig::errors.
ResolvedConfig load_config(const std::string& path, const std::vector<std::string>& overrides);

// Prints the config's problems (one line each, prefixed by `path`) and
// returns true when it has any: the caller then starts nothing (exit 2).
bool report_config_errors(const std::string& path, const ResolvedConfig& rc);

// The same without a file: defaults plus overrides (relative paths: the CWD).
ResolvedConfig resolve_config_from_overrides(const std::vector<std::string>& overrides);

// Resolves gateway.state_dir in the gateway's config `gw`: "auto" becomes
// <run dir>/gateway_state when `durable` (serve, online training), else
// "none"; a relative path is taken from the config's directory. Returns the
// directory, or "" for none. A fresh (not resuming) training run moves a
// previous run's state aside to gateway_state.previous, saying so.
std::string resolve_gateway_state_dir(const ResolvedConfig& rc, Json& gw, bool durable, bool fresh_training_run);

}  // namespace areal::host
