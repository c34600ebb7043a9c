// The engine under the engine server: any areal inference plugin (normally
// `local`, the libtorch engine, or `mock_inference` for scripted replies),
// loaded through the ABI. A Generation is one request whose output arrives
// as a queue of events the HTTP handler thread drains.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/plugin_host/plugin_instance.hpp"
#include "core/hf/tokenizer/tokenizer.hpp"

namespace areal::engine_server {

struct SamplingRequest {
  float temperature = 1.0f;
  float top_p = 1.0f;
  int32_t top_k = 0;
  int32_t max_new_tokens = 16;
  std::optional<uint64_t> seed;
  bool ignore_eos = false;
  std::vector<int32_t> stop_ids;
  std::vector<std::string> stop_strings;
  float frequency_penalty = 0, presence_penalty = 0;
  std::vector<areal_logit_bias> logit_bias;
  int32_t structured_output = AREAL_STRUCTURED_NONE;
  std::string json_schema;
  std::string adapter;  // a LoRA adapter loaded with load_adapter; empty: the base
};

struct Event {
  std::vector<int32_t> ids;
  std::vector<float> logprobs;
  bool done = false;
  int32_t finish = 0;  // areal_finish_reason when done
  std::string error;
};

class Generation {
 public:
  std::string rid;
  uint64_t id = 0;
  // Blocks until an event arrives; false after the final one was taken.
  bool next(Event& out);

 private:
  friend class Engine;
  static areal_status* on_tokens(void* ctx, const areal_gen_chunk* chunk);
  static void on_done(void* ctx, int32_t finish, const areal_status* error);
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Event> events_;
  bool finished_ = false, drained_ = false;
  areal_gen_sink sink_{};
  class Engine* engine_ = nullptr;
};

class Engine {
 public:
  Engine(const std::string& plugin_dir, const std::string& plugin, const std::string& config_json, const std::string& tokenizer_dir);
  ~Engine();

  // Throws areal::Error when the engine refuses the request.
  std::shared_ptr<Generation> generate(const std::string& rid, const std::vector<int32_t>& prompt, const SamplingRequest& s);
  void abort(const std::shared_ptr<Generation>& g);
  // The client of `g` left mid-stream: abort it, as both servers do, and
  // take its remaining events.
  void abort_and_drain(const std::shared_ptr<Generation>& g);
  // Aborts every live generation whose rid starts with `prefix` ("" = all);
  // with `wait`, returns once each has ended (an engine finishes aborted
  // running requests only while not paused: the pause routes abort first).
  size_t abort_matching(const std::string& prefix, bool exact = false, bool wait = true);
  void pause();
  void resume();
  bool paused();
  // Waits until no generation is live.
  void wait_idle();
  void update_weights_from_disk(const std::string& path, int64_t version);
  // LoRA adapters (a PEFT folder under a name), when the plugin serves them
  // (ABI 1.6); UNSUPPORTED otherwise.
  void load_adapter(const std::string& name, const std::string& dir);
  void unload_adapter(const std::string& name);
  bool has_adapter(const std::string& name);
  nlohmann::json info();
  int64_t max_context() const { return max_context_; }
  std::string decode(const std::vector<int32_t>& ids) const;  // "" without a tokenizer
  bool has_tokenizer() const { return tokenizer_ != nullptr; }
  int32_t eos_token_id() const { return eos_token_id_; }

 private:
  friend class Generation;
  void finished(Generation* g);

  std::shared_ptr<LoadedPlugin> plugin_;
  std::string instance_name_ = "engine";
  areal_services services_{};
  std::unique_ptr<PluginInstance> instance_;
  std::shared_ptr<const tokenizer::Tokenizer> tokenizer_;
  std::mutex mutex_;
  std::condition_variable idle_cv_;
  std::map<uint64_t, std::shared_ptr<Generation>> live_;
  bool paused_ = false;
  int64_t max_context_ = 4096;  // from info(), read once: it does not change
  int32_t eos_token_id_ = -1;
};

}  // namespace areal::engine_server
