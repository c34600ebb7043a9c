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

class VLLMInference : public RemoteEngine {
 public:
  static constexpr const char* kName = "vllm";
  static constexpr const char* kVersion = "0.1.0";
  static constexpr const char* kDescription =
      "vLLM servers over HTTP (/v1/completions from token ids, streamed): several servers with affinity, health checks, retries, pause "
      "with abort-and-resubmit, weight updates from disk.";
  static constexpr const char* kConfigSchema = R"({"type": "object", "keys": {)" AREAL_REMOTE_ENGINE_SCHEMA_KEYS R"(,
    "launcher": {"type": "string", "enum": ["areal", "stock"], "default": "areal", "doc": "The server program behind the URLs: areal (AReaL's vLLM server: /areal_pause_generation, /areal_continue_generation, /areal_update_weights) or stock (vLLM's own api_server started with VLLM_SERVER_DEV_MODE=1: /pause?mode=abort, /resume, and weight updates by /collective_rpc reload_weights then /reset_prefix_cache)."},
    "pause_path": {"type": "string", "default": "", "doc": "Route that aborts running requests and holds new ones; empty: the launcher's (areal: /areal_pause_generation, stock: /pause?mode=abort)."},
    "resume_path": {"type": "string", "default": "", "doc": "Route that ends the pause; empty: the launcher's (areal: /areal_continue_generation, stock: /resume)."},
    "update_weights_path": {"type": "string", "default": "", "doc": "Route that reloads weights from a folder; empty: the launcher's (areal: /areal_update_weights, stock: /collective_rpc). areal: body {\"model_path\": DIR, \"load_format\": \"auto\"}; stock: /collective_rpc with {\"method\": \"reload_weights\", \"kwargs\": {\"weights_path\": DIR}}."}
  }})";

  explicit VLLMInference(const sdk::CreateContext& ctx) : VLLMInference(sdk::parse_object(ctx.config_json(), "vllm: config")) {}

 private:
  explicit VLLMInference(const nlohmann::json& c)
      : RemoteEngine(std::make_unique<areal::remote::VLLMProtocol>(c.value("model", std::string()), areal::remote::VLLMRoutes::from_config(c)),
                     areal::remote::EngineOptions::from_json(c)) {}
};

}  // namespace

AREAL_EXPORT_INFERENCE(VLLMInference)
