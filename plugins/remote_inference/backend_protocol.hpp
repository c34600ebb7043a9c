// What differs between SGLang and vLLM: request bodies, stream events and
// control routes. Everything else (servers, retries, pause, resubmission,
// versions) is the RemoteEngine's, shared by both plugins.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "areal/inference.h"
#include "http_client.hpp"

namespace areal::remote {

// A request's sampling controls, owned (the ABI's are borrowed).
struct Sampling {
  float temperature = 1.0f;
  float top_p = 1.0f;
  int32_t top_k = 0;  // <= 0: off
  int32_t max_new_tokens = 1;
  bool has_seed = false;
  uint64_t seed = 0;
  bool ignore_eos = false;
  std::vector<int32_t> stop_ids;
  std::vector<std::string> stop_strings;
  // ABI 1.3: sent in the server's own fields.
  float frequency_penalty = 0, presence_penalty = 0;
  std::vector<std::pair<int32_t, float>> logit_bias;
  int32_t structured_output = 0;  // areal_structured_output
  std::string json_schema;        // with AREAL_STRUCTURED_JSON_SCHEMA

  // The seed as both servers take it: vLLM validates it as a signed 64-bit
  // integer (a larger one is a 400) and SGLang keeps it in an int64 tensor.
  // The ABI's seed is 64 unsigned bits (derived seeds wrap, a client's -1
  // arrives as 2^64 - 1): its low 63 bits, the same seed every time.
  int64_t server_seed() const { return static_cast<int64_t>(seed & static_cast<uint64_t>(std::numeric_limits<int64_t>::max())); }

  // logit_bias as both servers take it: {"<token id>": bias}.
  nlohmann::json logit_bias_json() const {
    nlohmann::json b = nlohmann::json::object();
    for (const auto& [id, bias] : logit_bias) b[std::to_string(id)] = bias;
    return b;
  }
};

// One HTTP generation call: a request's prompt plus what it produced so far.
struct Segment {
  std::string rid;
  const std::vector<int32_t>* input_ids = nullptr;
  Sampling sampling;  // max_new_tokens = what is left
  std::string adapter;  // the server's name of the LoRA adapter to generate with; empty: the base model
};

enum class Finish { kNone, kStop, kLength, kAbort };

// What one stream event adds.
struct SegmentUpdate {
  std::vector<int32_t> ids;
  std::vector<float> logprobs;
  Finish finish = Finish::kNone;
  std::string message;  // the server's words for an abort
  int status = 0;       // an abort's HTTP status when the server gives one (SGLang's status_code: 400 a bad request, 5xx its own failure)
};

class BackendProtocol {
 public:
  virtual ~BackendProtocol() = default;
  virtual std::string name() const = 0;  // "sglang", "vllm"
  virtual std::string generate_path() const = 0;
  virtual nlohmann::json generate_body(const Segment& segment) const = 0;
  // One SSE payload other than [DONE]. `received`: tokens of this segment
  // taken so far (SGLang's default stream repeats them). Throws
  // std::runtime_error on a malformed event.
  virtual SegmentUpdate parse_event(const nlohmann::json& event, size_t received) const = 0;
  virtual std::string health_path() const { return "/health"; }
  // Control calls; throw std::runtime_error with the server's words on failure.
  virtual void pause(const Url& server, double timeout_s) const = 0;
  virtual void resume(const Url& server, double timeout_s) const = 0;
  virtual void update_weights_from_disk(const Url& server, const std::string& path, int64_t version, double timeout_s) const = 0;
  // LoRA adapters the server loads from a PEFT folder it can read, under a
  // name requests then give (Segment::adapter). A protocol without them
  // says false and is never asked.
  virtual bool serves_adapters() const { return false; }
  virtual void load_adapter(const Url& /*server*/, const std::string& /*served_name*/, const std::string& /*dir*/, double /*timeout_s*/) const {
    throw std::runtime_error(name() + " serves no LoRA adapters");
  }
  virtual void unload_adapter(const Url& /*server*/, const std::string& /*served_name*/, double /*timeout_s*/) const {}
  // Best effort, after the connection is closed (vLLM aborts on disconnect).
  virtual void abort(const Url& /*server*/, const std::string& /*rid*/, double /*timeout_s*/) const {}
  // How to make a server report log-probs of the sampling distribution.
  virtual std::string logprob_fix() const = 0;
};

// A control call the server refused or never answered; `status` is its
// HTTP status (0: no answer), so a 4xx (the request's fault) can be told
// from an unreachable server.
struct ControlError : std::runtime_error {
  ControlError(int http_status, const std::string& message) : std::runtime_error(message), status(http_status) {}
  int status;
};

// POSTs a JSON body and throws ControlError unless the server says 200
// (and "success" is not false). Returns the parsed body (null when not JSON).
nlohmann::json post_control(const Url& server, const std::string& path, const nlohmann::json& body, double timeout_s,
                            const std::string& what);

}  // namespace areal::remote
