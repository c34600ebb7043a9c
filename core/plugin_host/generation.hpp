// Blocking generation over any inference plugin: submit a request, collect
// the streamed chunks, wait for on_done.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "areal/plugin_api.h"

namespace areal {

struct GenerationResult {
  std::vector<int32_t> output_ids;
  std::vector<float> logprobs;
  std::vector<int64_t> versions;
  int32_t finish_reason = 0;
  int32_t error_code = 0;  // set with AREAL_FINISH_ERROR
  std::string error_message;
  int on_done_calls = 0;   // must end at exactly 1 (checked by conformance)
  size_t chunks = 0;
  // ABI 1.7, for a request with record_routing: what on_routing reported.
  int on_routing_calls = 0;
  uint32_t routing_layers = 0, routing_top_k = 0, routing_experts = 0;
  size_t routing_positions = 0;
  std::vector<uint16_t> routing;  // [positions][layers][top_k]
};

// A sink that collects one request's output. Its address is the sink ctx,
// so it must not move while the request is in flight.
class CollectingSink {
 public:
  CollectingSink();
  CollectingSink(const CollectingSink&) = delete;
  CollectingSink& operator=(const CollectingSink&) = delete;

  const areal_gen_sink* sink() const { return &sink_; }
  // Waits for on_done; false on timeout.
  bool wait(std::chrono::milliseconds timeout);
  GenerationResult result() const;
  // When set, on_tokens returns an error after this many chunks (tests abort).
  void fail_after_chunks(size_t n) { fail_after_ = n; }

 private:
  static areal_status* on_tokens(void* ctx, const areal_gen_chunk* chunk);
  static void on_done(void* ctx, int32_t reason, const areal_status* error);
  static void on_routing(void* ctx, const areal_routing* routing);

  areal_gen_sink sink_;
  mutable std::mutex mutex_;
  std::condition_variable done_cv_;
  GenerationResult result_;
  size_t fail_after_ = SIZE_MAX;
};

// Submits and waits. Throws areal::Error for a submit error, a timeout
// (after aborting), or a backend error reported through on_done.
GenerationResult generate_blocking(const areal_inference_vtable& vt, void* self, const areal_gen_request& request,
                                   std::chrono::milliseconds timeout);

// "stop", "length", "abort", "error" for an areal_finish_reason; "unknown" otherwise.
const char* finish_reason_name(int32_t reason);

// A process-unique request id.
uint64_t next_request_id();

}  // namespace areal
