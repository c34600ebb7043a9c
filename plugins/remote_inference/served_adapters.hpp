// Which LoRA adapters the remote servers hold, and under which names
// (ABI 1.6 load_adapter / unload_adapter for the vllm plugin).
//
// Each load gets a name of its own on the servers ("policy@7"): vLLM
// refuses to load a name it has (unless in place, which re-reads the folder
// at every step and keeps prefix-cache blocks of the old weights), and keys
// its prefix cache by the adapter. A request resolves its adapter at the
// start of each segment, so after a replacement its next segment uses the
// new one; an adapter replaced or unloaded is retired, and leaves the
// servers once no request holds it (in-flight requests finish with it).
// Bookkeeping only: the engine makes the HTTP calls.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace areal::remote {

struct RemoteAdapter {
  std::string name;         // as requests name it
  int64_t version = 0;      // stamped on the tokens it generates
  std::string served_name;  // as the servers know it
  std::string dir;          // the PEFT folder the servers loaded
  bool owned_dir = false;   // written by the plugin (an adapter from memory): removed once retired
  std::string source;       // the folder given, or "memory"
};

class ServedAdapters {
 public:
  // A name for the servers no earlier load used: NAME@N.
  std::string new_served_name(const std::string& name);
  // `adapter` serves requests naming adapter->name from now on (and those
  // naming none when is_default); the one it replaces is retired.
  void install(std::shared_ptr<const RemoteAdapter> adapter, bool is_default);
  // The adapters requests can name now.
  std::vector<std::shared_ptr<const RemoteAdapter>> current() const;
  // The default adapter's name now ("" when there is none): a request that
  // names none is bound to it at submit, as the local engine binds it.
  std::string default_name() const;
  // Retires the adapter called `name`; false when none is.
  bool uninstall(const std::string& name);
  // The adapter for a request's next segment: `requested` (empty: the
  // default adapter, or the base model when there is none). `held` is the
  // one the request had (it keeps an unloaded one to finish with) and
  // becomes the answer; false when `requested` is not loaded and not held.
  bool resolve(const std::string& requested, std::shared_ptr<const RemoteAdapter>& held) const;
  // Retired adapters no request holds any more, removed from here: the
  // caller unloads them from the servers.
  std::vector<std::shared_ptr<const RemoteAdapter>> take_unused_retired();
  bool empty() const;
  // info's "loaded_adapters": [{name, version, served_as, source, default}].
  nlohmann::json describe() const;

 private:
  mutable std::mutex mutex_;
  std::map<std::string, std::shared_ptr<const RemoteAdapter>> current_;
  std::vector<std::shared_ptr<const RemoteAdapter>> retired_;
  std::string default_;
  uint64_t loads_ = 0;
};

}  // namespace areal::remote
