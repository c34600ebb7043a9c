// The host's config: its own keys, its plugin sections, and resolution of
// a raw YAML tree into the effective config every component reads.
//
// A plugin section looks like
//   inference:
//     plugin: mock_inference     # a name, a path to a .so, or "none" (optional sections)
//     vocab_size: 512            # the plugin's own keys (its config schema)
// The host removes `plugin` and hands the rest to the plugin as JSON.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>
#include <cstdint>

#include <nlohmann/json.hpp>

#include "core/config/host_settings.hpp"
#include "core/plugin_host/plugin_catalog.hpp"

namespace areal {

using Json = nlohmann::json;

struct PluginSection {
  const char* name;            // YAML key
  int32_t kind;                // areal_plugin_kind
  const char* default_plugin;  // used when the section or its `plugin` key is absent; "" = required
  bool optional;               // `plugin: none` disables it
  const char* doc;
};

// The plugin sections the host knows, in start-up order.
const std::vector<PluginSection>& plugin_sections();

// Schema (config_schema.hpp format) of the host's non-plugin keys.
const Json& host_schema();

struct ResolvedConfig {
  Json effective;       // with defaults; plugin sections carry their resolved `plugin`
  HostSettings host;    // the host's keys, typed (valid when errors is empty)
  std::string base_dir; // the config file's directory: relative paths start here
  std::map<std::string, std::shared_ptr<LoadedPlugin>> plugins;  // by section; absent when "none"
  std::vector<std::string> errors;  // every problem found, one line each

  // The section's JSON without `plugin` (what the plugin's create receives).
  std::string section_json(const std::string& section) const;
  // A path from the config, made absolute against base_dir.
  std::string path(const std::string& value) const;
};

// train.world_size (1 without a train section or the key): the train rank
// processes `areal-host run` starts.
int train_world_size(const ResolvedConfig& rc);

// Validates a raw config (file plus overrides): host keys, then loads each
// section's plugin and validates the section against its schema. Never
// throws for config mistakes: they are collected in `errors`.
ResolvedConfig resolve_config(Json raw, const std::string& base_dir);

// What `areal-host run` needs beyond valid keys: the job's plugins and the
// rules between keys (online mode takes no workflow, n_samples 1, ...).
// One line per problem; empty when the job can start.
std::vector<std::string> run_job_problems(const ResolvedConfig& rc);

// The full configuration reference as Markdown tables: host keys and the
// sections of every plugin `catalog` can load.
std::string configuration_reference(const PluginCatalog& catalog);

}  // namespace areal
