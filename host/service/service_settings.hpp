// The managed service's configuration (`areal-host service --config x.yaml`,
// its `service:` section; docs/service.md lists every key): where it listens
// and keeps its state, the base models users may train (each a job template:
// an areal-host run config), the evaluations and hyper-parameters jobs may
// ask for, and per-user quotas.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace areal::host::service {

using Json = nlohmann::json;

struct ParameterLimit {
  std::optional<double> min, max;  // numbers
  std::vector<Json> one_of;        // or a list of allowed values
  // Why `value` is refused, or "" when it is allowed.
  std::string refusal(const std::string& key, const Json& value) const;
};

struct ServiceSettings {
  std::string host = "127.0.0.1";
  int port = 8090;
  std::string state_dir;  // absolute: tenants.sqlite3 and users/<user>/<experiment>/<trial>/
  std::string admin_api_key;
  std::string config_dir;  // the service file's directory
  // name -> job template (absolute path of an areal-host run config).
  std::map<std::string, std::string> models;
  // name -> the template's `evaluation` keys (agent_command, dataset, greedy, ...).
  std::map<std::string, Json> evaluations;
  std::map<std::string, ParameterLimit> hyperparameters;  // dotted config key -> limit
  int64_t max_active_jobs = 2;      // queued, running or paused jobs per user
  int64_t max_open_sessions = 1024; // sessions a user's agents hold open at once
  int64_t max_tokens = 0;           // tokens trained over all of a user's jobs; 0: no limit
  int64_t checkpoint_every = 20;    // trainer.checkpoint_every of every job (resume after a restart)
};

// Reads `path` (YAML). Throws areal::Error INVALID_ARGUMENT naming the key
// for anything missing, unknown or out of range.
ServiceSettings load_service_settings(const std::string& path);

}  // namespace areal::host::service
