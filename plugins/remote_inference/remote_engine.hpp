// The engine behind the sglang and vllm plugins: an areal inference backend
// (plugin_api/include/areal/inference.h) over HTTP servers that speak one
// BackendProtocol.
//
// Each request runs on a worker thread as a series of streamed segments.
// Tokens reach the sink as they arrive, stamped with the version the plugin
// served when the segment started. pause() stops new segments, asks every
// server to abort what it runs, closes the streams still open and waits
// until no segment is in flight, so a segment never spans a weight update; after resume() an interrupted
// request is resubmitted as prompt + tokens so far with the remaining
// budget (AReaL's partial rollout). A server that fails is taken out of
// rotation and the segment is retried elsewhere with backoff; when every
// try fails the request ends with AREAL_FINISH_ERROR (UNAVAILABLE), which
// the gateway answers with 502. Tokens already delivered are never taken
// back.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <thread>
#include <vector>
#include <cstdint>
#include <string_view>

#include <nlohmann/json.hpp>

#include "areal/inference.h"
#include "backend_protocol.hpp"
#include "served_adapters.hpp"
#include "server_pool.hpp"

namespace areal::remote {

struct EngineOptions {
  std::vector<std::string> servers;
  std::string model;
  int64_t max_context = 0;
  double connect_timeout_s = 5;
  double idle_timeout_s = 600;  // longest wait for the next stream event
  double control_timeout_s = 600;  // pause/resume/weight updates
  int max_retries = 3;
  double retry_backoff_s = 0.5;
  double health_check_interval_s = 5;
  double startup_timeout_s = 60;
  double pause_drain_timeout_s = 30;
  bool verify_logprobs = true;
  int max_concurrency = 1024;
  std::string adapter_dir;  // where adapters handed over in memory are written for the servers; empty: a temporary folder
  static EngineOptions from_json(const nlohmann::json& config);  // the shared schema keys
};

// Schema keys every remote plugin has (JSON object members, no braces), a
// string literal so a plugin's kConfigSchema stays a constant expression.
#define AREAL_REMOTE_ENGINE_SCHEMA_KEYS \
  R"("servers": {"type": "array", "items": {"type": "string"}, "doc": "Base URLs of the servers, e.g. [\"http://127.0.0.1:30000\"]. Required, at least one."},)" \
  R"("model": {"type": "string", "default": "", "doc": "Model name reported by info and /v1/models; empty: the first server's (from its /v1/models)."},)" \
  R"("max_context": {"type": "integer", "default": 0, "minimum": 0, "doc": "Prompt plus output limit; 0: the first server's max_model_len from /v1/models."},)" \
  R"("connect_timeout_s": {"type": "number", "default": 5, "minimum": 0.1, "doc": "Connection timeout per HTTP call."},)" \
  R"("idle_timeout_s": {"type": "number", "default": 600, "minimum": 1, "doc": "Longest wait for the next streamed event; there is no total timeout on a long generation."},)" \
  R"("control_timeout_s": {"type": "number", "default": 600, "minimum": 1, "doc": "Timeout of pause, resume and weight-update calls."},)" \
  R"("max_retries": {"type": "integer", "default": 3, "minimum": 0, "doc": "Retries of a failed segment (on another server when one is up) before the request fails with UNAVAILABLE (502 at the gateway)."},)" \
  R"("retry_backoff_s": {"type": "number", "default": 0.5, "minimum": 0, "doc": "First retry delay; doubles per retry up to 8 s."},)" \
  R"("health_check_interval_s": {"type": "number", "default": 5, "minimum": 0.1, "doc": "How often each server's health route is probed; a failed server returns to rotation when it passes."},)" \
  R"("startup_timeout_s": {"type": "number", "default": 60, "minimum": 0, "doc": "How long create waits for every server to answer its health route."},)" \
  R"("pause_drain_timeout_s": {"type": "number", "default": 30, "minimum": 0.1, "doc": "How long pause waits for the segments it interrupted to end (it warns and goes on after that)."},)" \
  R"("verify_logprobs": {"type": "boolean", "default": true, "doc": "At create, check with two one-token requests that each server reports log-probs of the sampling distribution (the ABI's convention); refuse a server in raw mode."},)" \
  R"("max_concurrency": {"type": "integer", "default": 1024, "minimum": 1, "maximum": 65536, "doc": "Requests in flight at once (one worker thread each); more wait in a queue."})"

class RemoteEngine {
 public:
  RemoteEngine(std::unique_ptr<BackendProtocol> protocol, EngineOptions options);
  ~RemoteEngine();
  RemoteEngine(const RemoteEngine&) = delete;
  RemoteEngine& operator=(const RemoteEngine&) = delete;

  void submit(const areal_gen_request& request, const areal_gen_sink& sink);
  void abort(uint64_t request_id);
  void pause();
  void resume();
  void update_weights(std::string_view spec_json);
  int64_t version();
  void set_version(int64_t version);
  std::string info();
  // ABI 1.6 load_adapter / unload_adapter, for a protocol that serves
  // adapters (the plugin exposes them under those names only then). Each
  // server loads the adapter's PEFT folder (a given path, or one written to
  // adapter_dir from the tensors) under a new name; the requests' next
  // segments use it. Paused around it, like a weight update.
  void load_served_adapter(std::string_view spec_json, const areal_tensor_map* tensors);
  void unload_served_adapter(std::string_view name);

 private:
  struct Job;
  enum class Outcome { kStop, kLength, kAbort, kServerError, kClientError };
  struct SegmentResult {
    Outcome outcome = Outcome::kServerError;
    size_t tokens = 0;
    std::string message;
  };

  void pause_locked();   // control_mutex_ held
  void resume_locked();  // control_mutex_ held
  // A control call's scope (weight update, adapter load): holds the control
  // lock and keeps the engine paused, pausing unless the caller (the
  // trainer) already had, and resuming at scope exit only then.
  class ControlPause;
  void wait_for_servers();
  void verify_logprob_convention();
  int64_t fetch_max_context();
  void worker();
  void run(Job& job, bool& done);  // done: on_done was called
  SegmentResult run_segment(Job& job, int64_t version, uint64_t epoch, size_t segment_index, const std::string& adapter);
  void health_loop();
  // Unloads from every server the retired adapters no request holds.
  void release_retired_adapters();
  std::string adapter_folder_for(const std::string& name, int64_t version, const std::string& served_name);
  void log(int level, const std::string& message) const;
  // Counters on /metrics: areal_inference_<what>_total{backend="sglang"}.
  void count(const char* what) const;

  std::unique_ptr<BackendProtocol> protocol_;
  EngineOptions opt_;
  ServerPool pool_;
  std::string rid_prefix_;

  std::mutex mutex_;  // everything below
  std::condition_variable cv_;        // queue, pause, abort, stopping
  std::condition_variable drained_;   // segments_in_flight_ reached 0
  std::deque<std::shared_ptr<Job>> queue_;
  std::map<uint64_t, std::shared_ptr<Job>> live_;
  std::vector<std::thread> workers_;
  size_t idle_workers_ = 0;
  bool paused_ = false, stopping_ = false;
  uint64_t pause_epoch_ = 0;
  int segments_in_flight_ = 0;
  int64_t version_ = 0;
  ServedAdapters adapters_;
  std::string adapter_root_;  // adapter_dir, or the temporary folder made on the first adapter from memory
  bool adapter_root_owned_ = false;
  std::mutex control_mutex_;  // one pause/resume/update at a time
  // The last weights a disk update put on the servers (path, version), under
  // control_mutex_: a server back from down may have restarted on the
  // weights it was launched with, and gets these again first.
  std::optional<std::pair<std::string, int64_t>> last_disk_update_;
  std::thread health_;
  std::condition_variable health_cv_;
};

}  // namespace areal::remote
