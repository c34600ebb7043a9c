// Which model names a request may ask for are LoRA adapters of the inference
// backend (ABI 1.6: its info says "adapters": true and lists
// "loaded_adapters"). A request whose OpenAI/Anthropic `model` names one is
// generated with that adapter; any other name (clients send "gpt-4o", the
// base model's name, or nothing) gets the base model, as before: the field
// is never a reason to refuse a request.
//
// The list is read from the backend's info, again at most once a second:
// adapters loaded or unloaded while serving (a trainer's new version, a
// finished job's) are seen without a call per request.
#pragma once

#include <chrono>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "areal/plugin_api.h"

namespace areal::proxy {

class AdapterNames {
 public:
  explicit AdapterNames(const areal_inference_ref* inference) : inference_(inference) {}
  // The adapter to generate `model` with; empty: the base model.
  std::string adapter_for(const std::string& model);
  // The adapters loaded now (for GET /v1/models).
  std::vector<std::string> loaded();

 private:
  bool backend_serves_adapters() const;
  void refresh_locked();

  const areal_inference_ref* inference_;
  std::mutex mutex_;
  std::set<std::string> names_;
  std::chrono::steady_clock::time_point refreshed_{};
  bool ever_refreshed_ = false;
};

}  // namespace areal::proxy
