// vllm: an inference plugin that generates on vLLM servers over HTTP
// (docs/backends.md). The shared engine is plugins/remote_inference.
#include <memory>
#include <string>

#include "areal/sdk.hpp"
#include "areal/sdk_json.hpp"
#include "remote_engine.hpp"
#include "vllm_protocol.hpp"

namespace {

namespace sdk = areal::sdk;
using areal::remote::RemoteEngine;

areal::remote::VLLMRoutes routes_of(const nlohmann::json& c) {
  areal::remote::VLLMRoutes r;
  r.pause = c.value("pause_path", r.pause);
  r.resume = c.value("resume_path", r.resume);
  r.update_weights = c.value("update_weights_path", r.update_weights);
  return r;
}

class VLLMInference : public RemoteEngine {
 public:
  static constexpr const char* kName = "vllm";
  static constexpr const char* kVersion = "0.1.0";
  static constexpr const char* kDescription =
      "vLLM servers over HTTP (/v1/completions from token ids, streamed): several servers with affinity, health checks, retries, pause "
      "with abort-and-resubmit, weight updates from disk.";
  static constexpr const char* kConfigSchema = R"({"type": "object", "keys": {)" AREAL_REMOTE_ENGINE_SCHEMA_KEYS R"(,
    "pause_path": {"type": "string", "default": "/areal_pause_generation", "doc": "Route that aborts running requests and holds new ones (AReaL's vLLM server); stock vLLM with VLLM_SERVER_DEV_MODE=1: /pause?mode=abort."},
    "resume_path": {"type": "string", "default": "/areal_continue_generation", "doc": "Route that ends the pause; stock vLLM dev mode: /resume."},
    "update_weights_path": {"type": "string", "default": "/areal_update_weights", "doc": "Route that reloads weights from a folder, body {\"model_path\": DIR, \"load_format\": \"auto\"} (AReaL's vLLM server)."}
  }})";

  explicit VLLMInference(const sdk::CreateContext& ctx) : VLLMInference(sdk::parse_object(ctx.config_json(), "vllm: config")) {}

 private:
  explicit VLLMInference(const nlohmann::json& c)
      : RemoteEngine(std::make_unique<areal::remote::VLLMProtocol>(c.value("model", std::string()), routes_of(c)),
                     areal::remote::EngineOptions::from_json(c)) {}
};

}  // namespace

AREAL_EXPORT_INFERENCE(VLLMInference)
