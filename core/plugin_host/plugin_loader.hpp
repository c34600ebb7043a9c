// Loading plugin libraries and validating what they declare.
//
// A plugin is refused, with one line naming the file and the reason, when:
// the file cannot be loaded, the entry symbol is missing, init fails or
// throws, the info or its vtable is too short for ABI 1.0, the ABI major
// differs, the kind is unknown, a required slot is NULL, or the declared name
// differs from the file name.
#pragma once

#include <memory>
#include <string>
#include <vector>
#include <cstdint>

#include "areal/plugin_api.h"

namespace areal {

// Human-readable kind ("inference"); "unknown(N)" for others.
std::string kind_name(int32_t kind);
// Parses a kind name; returns 0 when unknown.
int32_t kind_from_name(const std::string& name);

// A validated plugin. The host's own copies of info and vtable are zero-
// padded past the plugin's struct_size, so slots a plugin built against an
// older minor does not have read as NULL.
class LoadedPlugin {
 public:
  ~LoadedPlugin();
  LoadedPlugin(const LoadedPlugin&) = delete;
  LoadedPlugin& operator=(const LoadedPlugin&) = delete;

  const std::string& path() const { return path_; }  // "<built-in>" for built-ins
  bool builtin() const { return library_ == nullptr; }
  const areal_plugin_info& info() const { return info_; }
  int32_t kind() const { return info_.kind; }
  std::string name() const { return info_.name; }
  std::string version() const { return info_.version; }
  std::string abi_version() const;  // "1.0"

  // The kind's vtable, host copy. Only the one matching kind() is non-NULL.
  const areal_inference_vtable* inference() const;
  const areal_train_vtable* train() const;
  const areal_algorithm_vtable* algorithm() const;
  const areal_workflow_vtable* workflow() const;
  const areal_gateway_vtable* gateway() const;

  // create/destroy of whatever kind this is (all kinds share their shape).
  using CreateFn = areal_status* (*)(areal_str, const areal_services*, void**);
  using DestroyFn = void (*)(void*);
  CreateFn create_fn() const;
  DestroyFn destroy_fn() const;

 private:
  friend class PluginLoader;
  LoadedPlugin() = default;
  std::string path_;
  std::shared_ptr<void> library_;  // keeps the .so mapped; null for built-ins
  areal_plugin_info info_{};
  // Storage big enough for any kind's vtable (host view).
  union {
    areal_inference_vtable inference;
    areal_train_vtable train;
    areal_algorithm_vtable algorithm;
    areal_workflow_vtable workflow;
    areal_gateway_vtable gateway;
  } vtable_{};
};

class PluginLoader {
 public:
  // Loads a shared library by path (RTLD_NOW | RTLD_LOCAL) and validates it.
  // The same canonical path is loaded and initialised once per process.
  // Throws areal::Error whose message is "<path>: <reason>".
  static std::shared_ptr<LoadedPlugin> load_file(const std::string& path);

  // Validates a plugin linked into the host (the Envoy static-module idea):
  // same checks, same conformance suite, no file.
  static std::shared_ptr<LoadedPlugin> load_builtin(const std::string& name, areal_plugin_init_fn init);
};

// Built-in plugins are registered by areal-host's main before use.
void register_builtin(const std::string& name, areal_plugin_init_fn init);
std::vector<std::string> builtin_names();
std::shared_ptr<LoadedPlugin> load_builtin(const std::string& name);  // nullptr if no such built-in

}  // namespace areal
