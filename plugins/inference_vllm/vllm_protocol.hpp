// vLLM's OpenAI-compatible completions protocol (facts: docs/backends.md):
// POST /v1/completions with the prompt as token ids, streamed, with
// return_tokens_as_token_ids so each token comes back as "token_id:N" beside
// its log-prob. Stock vLLM aborts a request when its client disconnects.
// Pause, resume and weight reload are routes of the launcher the servers
// run: AReaL's vLLM server (/areal_*), or stock vLLM's api_server with
// VLLM_SERVER_DEV_MODE=1 (/pause?mode=abort, /resume, and a reload through
// /collective_rpc's reload_weights followed by /reset_prefix_cache).
#pragma once

#include <cstdint>
#include <string>

#include "backend_protocol.hpp"

namespace areal::remote {

// Which server program answers the control calls.
enum class VLLMLauncher { kAReaL, kStock };

struct VLLMRoutes {
  VLLMLauncher launcher = VLLMLauncher::kAReaL;
  std::string pause = "/areal_pause_generation";
  std::string resume = "/areal_continue_generation";
  std::string update_weights = "/areal_update_weights";
  // Parses the plugin config's launcher and *_path keys (paths default by launcher).
  static VLLMRoutes from_config(const nlohmann::json& config);
};

class VLLMProtocol : public BackendProtocol {
 public:
  VLLMProtocol(std::string model, VLLMRoutes routes) : model_(std::move(model)), routes_(std::move(routes)) {}
  std::string name() const override { return "vllm"; }
  std::string generate_path() const override { return "/v1/completions"; }
  nlohmann::json generate_body(const Segment& segment) const override;
  SegmentUpdate parse_event(const nlohmann::json& event, size_t received) const override;
  void pause(const Url& server, double timeout_s) const override;
  void resume(const Url& server, double timeout_s) const override;
  void update_weights_from_disk(const Url& server, const std::string& path, int64_t version, double timeout_s) const override;
  // LoRA adapters: POST /v1/load_lora_adapter {lora_name, lora_path} and
  // /v1/unload_lora_adapter {lora_name} (vLLM started with --enable-lora
  // and VLLM_ALLOW_RUNTIME_LORA_UPDATING=1); a request names one in "model".
  bool serves_adapters() const override { return true; }
  void load_adapter(const Url& server, const std::string& served_name, const std::string& dir, double timeout_s) const override;
  void unload_adapter(const Url& server, const std::string& served_name, double timeout_s) const override;
  std::string logprob_fix() const override {
    return "start vLLM with --logprobs-mode processed_logprobs (its default, raw_logprobs, reports temperature-1 log-probs)";
  }

 private:
  std::string model_;
  VLLMRoutes routes_;
};

}  // namespace areal::remote
