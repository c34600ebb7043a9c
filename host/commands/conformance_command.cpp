#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <exception>

#include "core/conformance/conformance.hpp"
#include "core/plugin_host/plugin_catalog.hpp"
#include "core/plugin_host/error.hpp"
#include "core/hf/model_files/byte_tokenizer.hpp"
#include "commands.hpp"

namespace areal::host {

namespace {

// A private directory removed on exit.
struct TempDir {
  std::string path;
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "areal-conformance-XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) throw Error(AREAL_CODE_UNAVAILABLE, "cannot create a temporary directory");
    path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

}  // namespace

int conformance(const CommandLine& cl) {
  if (cl.positional.empty()) {
    std::cerr << "areal-host conformance: name a plugin or a .so path\n";
    return 2;
  }
  const std::string target = cl.positional[0];
  PluginCatalog catalog;
  std::shared_ptr<LoadedPlugin> plugin;
  try {
    plugin = catalog.resolve(target);
  } catch (const std::exception& e) {
    // One line naming the file and the reason; nothing else to run.
    std::cerr << "refused: " << e.what() << "\n";
    return 2;
  }
  ConformanceOptions options;
  if (cl.flags.count("config")) options.config_json = cl.flags.at("config");
  if (cl.flags.count("data")) options.sample_data_json = cl.flags.at("data");
  if (plugin->kind() == AREAL_KIND_WORKFLOW || plugin->kind() == AREAL_KIND_GATEWAY) {
    try {
      options.reference_inference = catalog.resolve("mock_inference", AREAL_KIND_INFERENCE);
    } catch (const std::exception& e) {
      std::cerr << "note: no reference inference backend, dependent checks are skipped: " << e.what() << "\n";
    }
  }
  // Workflows also get gateway sessions: the built-in gateway with our byte-level tokenizer.
  std::unique_ptr<TempDir> tokenizer_dir;
  if (plugin->kind() == AREAL_KIND_WORKFLOW && options.reference_inference) {
    try {
      options.reference_gateway = catalog.resolve("gateway", AREAL_KIND_GATEWAY);
      tokenizer_dir = std::make_unique<TempDir>();
      model::write_byte_tokenizer(tokenizer_dir->path);
      options.reference_tokenizer_dir = tokenizer_dir->path;
    } catch (const std::exception& e) {
      std::cerr << "note: no reference gateway, episodes run without a session: " << e.what() << "\n";
    }
  }
  std::cout << "conformance: " << kind_name(plugin->kind()) << " plugin '" << plugin->name() << "' " << plugin->version()
            << " (ABI " << plugin->abi_version() << ") from " << plugin->path() << "\n";
  ConformanceReport report = run_conformance(plugin, options);
  for (const auto& c : report.checks) {
    const char* tag = c.skipped ? "SKIP" : (c.passed ? "PASS" : "FAIL");
    std::cout << "[" << tag << "] " << c.name << (c.detail.empty() ? "" : ": " + c.detail) << "\n";
  }
  std::cout << "conformance: " << report.passed() << " passed, " << report.failed() << " failed, " << report.skipped()
            << " skipped\n";
  if (report.failed() > 0) return 1;
  if (report.needs_config()) {
    // Not a verdict on the plugin: the checks that create an instance did not run.
    std::cout << "conformance: incomplete: '" << plugin->name() << "' needs configuration to run its instance checks (see the SKIP lines)\n";
    return 3;
  }
  return 0;
}

}  // namespace areal::host
