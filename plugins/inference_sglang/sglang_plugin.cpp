// sglang: an inference plugin that generates on SGLang servers over HTTP
// (docs/backends.md). The shared engine is plugins/remote_inference.
#include <memory>
#include <string>

#include "areal/sdk.hpp"
#include "areal/sdk_json.hpp"
#include "remote_engine.hpp"
#include "sglang_protocol.hpp"

namespace {

namespace sdk = areal::sdk;
using areal::remote::RemoteEngine;

class SGLangInference : public RemoteEngine {
 public:
  static constexpr const char* kName = "sglang";
  static constexpr const char* kVersion = "0.1.0";
  static constexpr const char* kDescription =
      "SGLang servers over HTTP (/generate from token ids, streamed): several servers with affinity, health checks, retries, pause with "
      "abort-and-resubmit, weight updates from disk.";
  static constexpr const char* kConfigSchema = R"({"type": "object", "keys": {)" AREAL_REMOTE_ENGINE_SCHEMA_KEYS R"(,
    "incremental_streaming_output": {"type": "boolean", "default": false, "doc": "Set when the servers run with --incremental-streaming-output (each streamed event then holds only new tokens)."}
  }})";

  explicit SGLangInference(const sdk::CreateContext& ctx) : SGLangInference(sdk::parse_object(ctx.config_json(), "sglang: config")) {}

 private:
  explicit SGLangInference(const nlohmann::json& c)
      : RemoteEngine(std::make_unique<areal::remote::SGLangProtocol>(c.value("incremental_streaming_output", false)),
                     areal::remote::EngineOptions::from_json(c)) {}
};

}  // namespace

AREAL_EXPORT_INFERENCE(SGLangInference)
