// SGLang's native HTTP protocol (facts: docs/backends.md): POST /generate with
// input_ids and sampling_params, streamed; meta_info.output_token_logprobs as
// [logprob, token_id, text] triples; /pause_generation, /continue_generation,
// /abort_request, /update_weights_from_disk.
#pragma once

#include <cstdint>
#include <string>

#include "backend_protocol.hpp"

namespace areal::remote {

class SGLangProtocol : public BackendProtocol {
 public:
  // incremental: the server runs with --incremental-streaming-output (each
  // event holds only new tokens); by default SGLang repeats all of them.
  explicit SGLangProtocol(bool incremental) : incremental_(incremental) {}
  std::string name() const override { return "sglang"; }
  std::string generate_path() const override { return "/generate"; }
  nlohmann::json generate_body(const Segment& segment) const override;
  SegmentUpdate parse_event(const nlohmann::json& event, size_t received) const override;
  void pause(const Url& server, double timeout_s) const override;
  void resume(const Url& server, double timeout_s) const override;
  void update_weights_from_disk(const Url& server, const std::string& path, int64_t version, double timeout_s) const override;
  void abort(const Url& server, const std::string& rid, double timeout_s) const override;
  std::string logprob_fix() const override {
    return "start the SGLang server without SGLANG_RETURN_ORIGINAL_LOGPROB=1 (SGLang's default reports temperature-scaled log-probs)";
  }

 private:
  bool incremental_;
};

}  // namespace areal::remote
