// The plugin conformance suite: what `areal-host conformance` runs on any
// plugin, and what ctest's `conformance` label runs on every in-tree one.
//
// Checks are grouped per kind (docs/plugin-guide.md lists them). Loading
// problems are not checks: the loader refuses such a plugin before any
// check runs, with one line naming the file and the reason.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/plugin_host/plugin_loader.hpp"

namespace areal {

struct ConformanceCheck {
  std::string name;
  bool passed = false;
  bool skipped = false;
  bool needs_config = false;  // skipped because the run lacks keys the plugin requires
  std::string detail;  // why it failed or was skipped
};

struct ConformanceOptions {
  std::string config_json = "{}";  // the instance config (schema defaults are filled in)
  std::string sample_data_json;    // workflows: dataset item; default from the plugin's extension
  // Workflows and gateways need an inference backend; this one is used
  // (normally the mock). Null skips the checks that need it.
  std::shared_ptr<LoadedPlugin> reference_inference;
  // Workflows: episodes also get a session on this gateway (with the
  // control slot) using this tokenizer folder, so workflows that chat in
  // process (episode.chat) or over HTTP are exercised. Either empty: none.
  std::shared_ptr<LoadedPlugin> reference_gateway;
  std::string reference_tokenizer_dir;
};

struct ConformanceReport {
  std::vector<ConformanceCheck> checks;
  size_t passed() const;
  size_t failed() const;
  size_t skipped() const;
  bool needs_config() const;  // incomplete: some checks need configuration the run was not given
};

ConformanceReport run_conformance(const std::shared_ptr<LoadedPlugin>& plugin, const ConformanceOptions& options);

}  // namespace areal
