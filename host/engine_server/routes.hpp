// One protocol's routes over the engine. handle() runs on the HTTP server's
// threads, concurrently.
#pragma once

#include <memory>
#include <string>
#include <cstdint>

#include "engine_bridge.hpp"
#include "http_util.hpp"

namespace areal::engine_server {

struct ServerOptions {
  std::string model_name = "test-model";
  bool raw_logprobs = false;       // emulates SGLANG_RETURN_ORIGINAL_LOGPROB=1 / vLLM's raw_logprobs
  bool incremental_stream = false; // SGLang --incremental-streaming-output
};

class Routes {
 public:
  virtual ~Routes() = default;
  virtual void handle(Request& req, Response& resp) = 0;
};

std::unique_ptr<Routes> make_sglang_routes(Engine& engine, const ServerOptions& options);
std::unique_ptr<Routes> make_vllm_routes(Engine& engine, const ServerOptions& options);

// Engine finish reason after a generation: what the last token was.
inline bool is_stop_id(const SamplingRequest& s, int32_t id) {
  for (int32_t x : s.stop_ids)
    if (x == id) return true;
  return false;
}

}  // namespace areal::engine_server
