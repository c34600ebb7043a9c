// Checks common to every kind, and dispatch to the per-kind files.
#include <regex>
#include <cstdint>
#include <functional>
#include <exception>

#include "core/config/config_schema.hpp"
#include "core/plugin_host/elf_exports.hpp"
#include "core/plugin_host/plugin_instance.hpp"
#include "checker.hpp"

namespace areal {

size_t ConformanceReport::passed() const {
  size_t n = 0;
  for (const auto& c : checks) n += c.passed && !c.skipped;
  return n;
}
size_t ConformanceReport::failed() const {
  size_t n = 0;
  for (const auto& c : checks) n += !c.passed && !c.skipped;
  return n;
}
bool ConformanceReport::needs_config() const {
  for (const auto& c : checks)
    if (c.needs_config) return true;
  return false;
}

size_t ConformanceReport::skipped() const {
  size_t n = 0;
  for (const auto& c : checks) n += c.skipped;
  return n;
}

namespace conformance {

void Checker::run(const std::string& name, const std::function<void()>& body) {
  ConformanceCheck check;
  check.name = name;
  try {
    body();
    check.passed = true;
  } catch (const ConfigNeeded& e) {
    check.skipped = true;
    check.needs_config = true;
    check.detail = e.what();
  } catch (const CheckSkipped& e) {
    check.skipped = true;
    check.detail = e.what();
  } catch (const std::exception& e) {
    check.detail = e.what();
  } catch (...) {
    check.detail = "a C++ exception of unknown type escaped the plugin";
  }
  report_.checks.push_back(std::move(check));
}

std::string effective_config(const LoadedPlugin& plugin, const std::string& config_json) {
  nlohmann::json cfg = nlohmann::json::parse(config_json);
  if (const char* schema_text = plugin.info().config_schema_json) {
    std::vector<std::string> errors;
    config::validate(nlohmann::json::parse(schema_text), cfg, plugin.name(), errors);
    std::vector<std::string> missing;
    for (const auto& e : errors)
      if (e.find("missing required key") != std::string::npos) missing.push_back(e);
    if (!missing.empty() && missing.size() == errors.size()) {
      std::string what = "needs configuration: " + missing.front();
      for (size_t i = 1; i < missing.size(); ++i) what += "; " + missing[i];
      throw ConfigNeeded(what + " (give it with --config '{...}'; `areal-host config-reference` and docs/configuration.md list the keys)");
    }
    if (!errors.empty()) throw Error(AREAL_CODE_INVALID_ARGUMENT, "conformance config: " + errors.front());
  }
  return cfg.dump();
}

int32_t code_of(areal_status* status) {
  int32_t code = status_code(status);
  free_status(status);
  return code;
}

}  // namespace conformance

ConformanceReport run_conformance(const std::shared_ptr<LoadedPlugin>& plugin, const ConformanceOptions& options) {
  using namespace conformance;
  ConformanceReport report;
  Checker c(report);
  const auto& info = plugin->info();

  c.run("info: name, version and description are well formed", [&] {
    static const std::regex kSemver("^[0-9]+\\.[0-9]+\\.[0-9]+([-+].*)?$");
    expect(std::regex_match(info.version, kSemver), std::string("version '") + info.version + "' is not semantic (MAJOR.MINOR.PATCH)");
    expect(info.description != nullptr && info.description[0] != '\0', "description is empty (shown by `areal-host plugins`)");
  });
  c.run("info: ABI minor is not newer than the host", [&] {
    // A newer minor loads, but this host cannot check what it appended.
    if (info.abi_minor > AREAL_ABI_MINOR) throw CheckSkipped("plugin built for a newer ABI minor; newer slots are not checked");
  });
  c.run("info: config schema is valid and its defaults satisfy it", [&] {
    if (info.config_schema_json == nullptr) throw CheckSkipped("plugin declares no config schema");
    nlohmann::json schema;
    try {
      schema = nlohmann::json::parse(info.config_schema_json);
    } catch (const std::exception& e) {
      throw CheckFailed(std::string("config_schema_json is not JSON: ") + e.what());
    }
    config::check_schema(schema, plugin->name());
    expect(schema.value("type", "") == "object", "the schema's top level must be an object");
  });
  c.run("loader: the library exports only areal_plugin_init", [&] {
    if (plugin->builtin()) throw CheckSkipped("built into areal-host, no library file");
    std::string extra;
    size_t count = 0;
    for (const auto& name : exported_symbols(plugin->path()))
      if (name != AREAL_PLUGIN_INIT_SYMBOL) {
        if (count++ < 5) extra += (extra.empty() ? "" : ", ") + name;
      }
    expect(count == 0, std::to_string(count) + " other exported symbol(s), e.g. " + extra +
                           ": build with areal_add_plugin (hidden visibility + version script) so plugins "
                           "cannot interpose each other's symbols");
  });
  c.run("lifecycle: destroy(NULL) is a no-op", [&] { plugin->destroy_fn()(nullptr); });
  c.run("lifecycle: create rejects malformed JSON config with a status", [&] {
    areal_services services = make_services("conformance");
    void* self = nullptr;
    const std::string bad = "{not json";
    areal_status* st = plugin->create_fn()(areal_str{bad.data(), bad.size()}, &services, &self);
    if (st == nullptr) {
      plugin->destroy_fn()(self);
      throw CheckFailed("create accepted '{not json' as a config");
    }
    expect(self == nullptr, "create failed but wrote *out_self");
    free_status(st);
  });

  switch (plugin->kind()) {
    case AREAL_KIND_INFERENCE: check_inference(plugin, options, c); break;
    case AREAL_KIND_WORKFLOW: check_workflow(plugin, options, c); break;
    case AREAL_KIND_GATEWAY: check_gateway(plugin, options, c); break;
    case AREAL_KIND_ALGORITHM: check_algorithm(plugin, options, c); break;
    case AREAL_KIND_TRAIN: check_train(plugin, options, c); break;
  }
  return report;
}

}  // namespace areal
