#include "service_settings.hpp"

#include <filesystem>

#include "core/config/config_loader.hpp"
#include "core/plugin_host/error.hpp"

namespace areal::host::service {
namespace {

namespace fs = std::filesystem;

[[noreturn]] void bad(const std::string& path, const std::string& what) {
  throw Error(AREAL_CODE_INVALID_ARGUMENT, path + ": " + what + " (see docs/service.md)");
}

void only_keys(const std::string& path, const Json& obj, const std::string& where, std::initializer_list<const char*> allowed) {
  for (const auto& [k, v] : obj.items()) {
    bool ok = false;
    for (const char* a : allowed) ok = ok || k == a;
    if (!ok) {
      std::string list;
      for (const char* a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
      bad(path, "unknown key '" + where + k + "' (known: " + list + ")");
    }
  }
}

}  // namespace

std::string ParameterLimit::refusal(const std::string& key, const Json& value) const {
  if (!one_of.empty()) {
    for (const auto& v : one_of)
      if (v == value) return "";
    return "'" + key + "' must be one of " + Json(one_of).dump() + ", got " + value.dump();
  }
  if (!value.is_number()) return "'" + key + "' must be a number, got " + value.dump();
  const double v = value.get<double>();
  if (min && v < *min) return "'" + key + "' must be at least " + Json(*min).dump() + ", got " + value.dump();
  if (max && v > *max) return "'" + key + "' must be at most " + Json(*max).dump() + ", got " + value.dump();
  return "";
}

ServiceSettings load_service_settings(const std::string& path) {
  const Json file = config::load_yaml_file(path);
  if (!file.is_object() || !file.contains("service") || !file["service"].is_object()) bad(path, "no `service:` section");
  only_keys(path, file, "", {"service"});
  const Json& s = file["service"];
  only_keys(path, s, "service.", {"host", "port", "state_dir", "admin_api_key", "models", "evaluations", "hyperparameters", "quotas", "checkpoint_every"});
  ServiceSettings out;
  out.config_dir = fs::absolute(path).parent_path().string();
  auto abs = [&](const std::string& p) { return fs::path(p).is_absolute() ? p : (fs::path(out.config_dir) / p).lexically_normal().string(); };
  auto str = [&](const char* key, std::string dflt) {
    if (!s.contains(key)) return dflt;
    if (!s[key].is_string()) bad(path, std::string("service.") + key + " must be a string");
    return s[key].get<std::string>();
  };
  auto integer = [&](const Json& obj, const std::string& where, const char* key, int64_t dflt, int64_t lo) {
    if (!obj.contains(key)) return dflt;
    if (!obj[key].is_number_integer() || obj[key].get<int64_t>() < lo) bad(path, where + key + " must be an integer >= " + std::to_string(lo));
    return obj[key].get<int64_t>();
  };
  out.host = str("host", out.host);
  out.port = static_cast<int>(integer(s, "service.", "port", out.port, 0));
  if (out.port > 65535) bad(path, "service.port must be in [0, 65535]");
  out.state_dir = abs(str("state_dir", ""));
  if (str("state_dir", "").empty()) bad(path, "service.state_dir is required (where users, keys and jobs are kept)");
  out.admin_api_key = str("admin_api_key", "");
  if (out.admin_api_key.size() < 16) bad(path, "service.admin_api_key is required: the operator's secret, at least 16 characters");
  out.checkpoint_every = integer(s, "service.", "checkpoint_every", out.checkpoint_every, 1);
  if (!s.contains("models") || !s["models"].is_object() || s["models"].empty())
    bad(path, "service.models must name at least one base model: {NAME: {config: JOB_TEMPLATE.yaml}}");
  for (const auto& [name, m] : s["models"].items()) {
    if (!m.is_object() || !m.contains("config") || !m["config"].is_string()) bad(path, "service.models." + name + ".config (a job template path) is required");
    only_keys(path, m, "service.models." + name + ".", {"config"});
    out.models[name] = abs(m["config"].get<std::string>());
    if (!fs::exists(out.models[name])) bad(path, "service.models." + name + ".config: no file " + out.models[name]);
  }
  if (s.contains("evaluations")) {
    if (!s["evaluations"].is_object()) bad(path, "service.evaluations must be a mapping of names to evaluation settings");
    for (const auto& [name, e] : s["evaluations"].items()) {
      if (!e.is_object() || !e.contains("agent_command")) bad(path, "service.evaluations." + name + ".agent_command is required");
      only_keys(path, e, "service.evaluations." + name + ".", {"agent_command", "dataset", "n_samples", "greedy", "temperature", "timeout_seconds"});
      Json ev = e;
      if (ev.contains("dataset") && ev["dataset"].is_string()) ev["dataset"] = abs(ev["dataset"].get<std::string>());
      out.evaluations[name] = ev;
    }
  }
  if (s.contains("hyperparameters")) {
    if (!s["hyperparameters"].is_object()) bad(path, "service.hyperparameters must map dotted config keys to {min, max} or {one_of}");
    for (const auto& [key, lim] : s["hyperparameters"].items()) {
      const std::string where = "service.hyperparameters." + key;
      if (!lim.is_object()) bad(path, where + " must be {min: X, max: Y} or {one_of: [...]}");
      only_keys(path, lim, where + ".", {"min", "max", "one_of"});
      ParameterLimit l;
      if (lim.contains("min")) l.min = lim["min"].get<double>();
      if (lim.contains("max")) l.max = lim["max"].get<double>();
      if (lim.contains("one_of")) {
        if (!lim["one_of"].is_array() || lim["one_of"].empty()) bad(path, where + ".one_of must be a non-empty list");
        l.one_of = lim["one_of"].get<std::vector<Json>>();
      }
      bool service_owned = false;
      for (const char* prefix : {"gateway.", "inference.", "launcher.", "dashboard.", "rollout.openai.", "evaluation.", "plugins."})
        service_owned = service_owned || key.rfind(prefix, 0) == 0;
      for (const char* exact : {"experiment.name", "experiment.trial", "experiment.output_dir", "trainer.resume", "trainer.checkpoint_every"})
        service_owned = service_owned || key == exact;
      if (service_owned)
        bad(path, where + ": the service sets this key for every job (its gateway, engine, run directory, evaluation and resume)");
      out.hyperparameters[key] = l;
    }
  }
  if (s.contains("quotas")) {
    const Json& q = s["quotas"];
    only_keys(path, q, "service.quotas.", {"max_active_jobs", "max_open_sessions", "max_tokens"});
    out.max_active_jobs = integer(q, "service.quotas.", "max_active_jobs", out.max_active_jobs, 1);
    out.max_open_sessions = integer(q, "service.quotas.", "max_open_sessions", out.max_open_sessions, 1);
    out.max_tokens = integer(q, "service.quotas.", "max_tokens", out.max_tokens, 0);
  }
  return out;
}

}  // namespace areal::host::service
