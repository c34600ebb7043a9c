// vllm: an inference plugin that generates on vLLM servers over HTTP
// (docs/backends.md). The shared engine is plugins/remote_inference.
#include <memory>
#include <string>
#include <string_view>

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
      "with abort-and-resubmit, weight updates from disk, LoRA adapters loaded and replaced at run time (one name per version).";
  static constexpr const char* kConfigSchema = R"({"type": "object", "keys": {)" AREAL_REMOTE_ENGINE_SCHEMA_KEYS R"(,
    "launcher": {"type": "string", "enum": ["areal", "stock"], "default": "areal", "doc": "The server program behind the URLs: areal (AReaL's vLLM server: /areal_pause_generation, /areal_continue_generation, /areal_update_weights) or stock (vLLM's own api_server started with VLLM_SERVER_DEV_MODE=1: /pause?mode=abort, /resume, and weight updates by /collective_rpc reload_weights then /reset_prefix_cache)."},
    "pause_path": {"type": "string", "default": "", "doc": "Route that aborts running requests and holds new ones; empty: the launcher's (areal: /areal_pause_generation, stock: /pause?mode=abort)."},
    "resume_path": {"type": "string", "default": "", "doc": "Route that ends the pause; empty: the launcher's (areal: /areal_continue_generation, stock: /resume)."},
    "update_weights_path": {"type": "string", "default": "", "doc": "Route that reloads weights from a folder; empty: the launcher's (areal: /areal_update_weights, stock: /collective_rpc). areal: body {\"model_path\": DIR, \"load_format\": \"auto\"}; stock: /collective_rpc with {\"method\": \"reload_weights\", \"kwargs\": {\"weights_path\": DIR}}."},
    "adapters": {"type": "object", "default": {}, "doc": "LoRA adapters loaded at start, name -> PEFT adapter folder the servers can read, each at version 0. Requests choose one by name (the OpenAI 'model' field through the gateway). The servers need --enable-lora (with --max-lora-rank at least the adapters' rank) and VLLM_ALLOW_RUNTIME_LORA_UPDATING=1."},
    "adapter_dir": {"type": "string", "default": "", "doc": "Where adapters handed over in memory (a LoRA trainer's, after every step) are written as PEFT folders for the servers to load: a folder they can read (shared storage when they run elsewhere). Empty: a temporary folder, removed at exit. Each version's folder is removed once no request uses it."}
  }})";

  explicit VLLMInference(const sdk::CreateContext& ctx) : VLLMInference(sdk::parse_object(ctx.config_json(), "vllm: config")) {}

  // ABI 1.6: LoRA adapters through vLLM's runtime LoRA API.
  void load_adapter(std::string_view spec, const areal_tensor_map* tensors) { load_served_adapter(spec, tensors); }
  void unload_adapter(std::string_view name) { unload_served_adapter(name); }

 private:
  explicit VLLMInference(const nlohmann::json& c)
      : RemoteEngine(std::make_unique<areal::remote::VLLMProtocol>(c.value("model", std::string()), areal::remote::VLLMRoutes::from_config(c)),
                     areal::remote::EngineOptions::from_json(c)) {
    if (!c.contains("adapters")) return;
    if (!c["adapters"].is_object()) throw sdk::invalid_argument("vllm: 'adapters' must be an object, name -> PEFT adapter folder");
    for (const auto& [name, dir] : c["adapters"].items()) {
      if (!dir.is_string()) throw sdk::invalid_argument("vllm: adapters." + name + " must be a folder path");
      load_served_adapter(nlohmann::json{{"name", name}, {"version", 0}, {"path", dir}}.dump(), nullptr);
    }
  }
};

}  // namespace

AREAL_EXPORT_INFERENCE(VLLMInference)
