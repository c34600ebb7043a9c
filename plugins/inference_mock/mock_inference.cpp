// mock_inference: a deterministic inference backend for tests, examples and
// the conformance suite's reference runs. Behaviour is documented in
// docs/plugin-guide.md ("The mock inference plugin"); the model is in
// mock_model.hpp.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>
#include <cstring>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "areal/sdk.hpp"
#include "areal/sdk_json.hpp"
#include "mock_model.hpp"

namespace {

using nlohmann::json;
namespace sdk = areal::sdk;

struct Request {
  uint64_t id;
  size_t script_index = 0;  // which scripted reply (script mode)
  std::vector<int32_t> input;
  areal_sampling_params sampling{};
  std::vector<int32_t> stop_ids;
  areal_gen_sink sink{};
  std::atomic<bool> aborted{false};
};

class MockInference {
 public:
  static constexpr const char* kName = "mock_inference";
  static constexpr const char* kVersion = "1.0.0";
  static constexpr const char* kDescription =
      "Deterministic hash-defined bigram model; exact logprobs, seeded sampling, no weights (tests and examples).";
  static constexpr const char* kConfigSchema = R"({"type": "object", "keys": {
    "model": {"type": "string", "default": "mock", "doc": "Model name reported by info and /v1/models."},
    "vocab_size": {"type": "integer", "default": 512, "minimum": 2, "maximum": 1000000, "doc": "Token ids are in [0, vocab_size)."},
    "eos_token_id": {"type": "integer", "default": -1, "minimum": -1, "doc": "Sampling this id finishes with STOP; -1 disables."},
    "max_context": {"type": "integer", "default": 4096, "minimum": 1, "doc": "Prompt plus output may not exceed this; longer prompts are rejected."},
    "token_delay_ms": {"type": "number", "default": 0, "minimum": 0, "doc": "Sleep per generated token, to simulate a slow backend."},
    "fail_after_tokens": {"type": "integer", "default": 0, "minimum": 0, "doc": "Tests of failure handling: every request fails (finish ERROR, code INTERNAL) after this many tokens of it; 0 never fails."},
    "workers": {"type": "integer", "default": 2, "minimum": 1, "maximum": 4096, "doc": "Requests decoded in parallel (one thread each)."},
    "weights_seed": {"type": "integer", "default": 0, "doc": "Selects the bigram table; update_weights may change it."},
    "logprob_mode": {"type": "string", "enum": ["sampling", "raw"], "default": "sampling", "doc": "sampling: log-probs of softmax(logits / temperature), the ABI's convention. raw: temperature-1 log-probs, which break that convention; only for test servers that emulate vLLM's or SGLang's raw mode."},
    "script": {"type": "array", "items": {"type": "array", "items": {"type": "integer"}}, "default": [], "doc": "Script mode: request n (in submission order) samples exactly script[n % len] (then STOP), logprobs still from the bigram table. For end-to-end tests of tool calls and agents."}
  }})";

  explicit MockInference(const sdk::CreateContext& ctx) {
    const json c = sdk::parse_object(ctx.config_json(), "mock_inference: config");
    model_ = c.value("model", "mock");
    vocab_ = c.value("vocab_size", 512);
    eos_ = c.value("eos_token_id", -1);
    max_context_ = c.value("max_context", 4096);
    delay_ms_ = c.value("token_delay_ms", 0.0);
    fail_after_tokens_ = c.value("fail_after_tokens", int64_t{0});
    weights_seed_ = c.value("weights_seed", int64_t{0});
    raw_logprobs_ = c.value("logprob_mode", std::string("sampling")) == "raw";
    if (vocab_ < 2) throw sdk::invalid_argument("mock_inference: vocab_size must be >= 2");
    script_ = c.value("script", std::vector<std::vector<int32_t>>{});
    for (const auto& reply : script_)
      for (int32_t id : reply)
        if (id < 0 || id >= vocab_) throw sdk::invalid_argument("mock_inference: script id " + std::to_string(id) + " is outside the vocabulary");
    const int workers = c.value("workers", 2);
    for (int i = 0; i < workers; ++i) threads_.push_back(sdk::guarded_thread("mock_inference", [this] { worker(); }));
  }

  ~MockInference() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
      for (auto& [_, r] : live_) r->aborted = true;
      paused_ = false;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
    // Requests never started still get their on_done, as the ABI promises.
    for (auto& r : queue_) sdk::contain("mock_inference", [&] { r->sink.on_done(r->sink.ctx, AREAL_FINISH_ABORT, nullptr); });
  }

  void submit(const areal_gen_request& req, const areal_gen_sink& sink) {
    if (req.input_ids == nullptr || req.input_ids_count == 0) throw sdk::invalid_argument("input_ids must not be empty");
    if (req.sampling == nullptr) throw sdk::invalid_argument("sampling params are required");
    if (sink.on_tokens == nullptr || sink.on_done == nullptr) throw sdk::invalid_argument("sink callbacks are required");
    auto r = std::make_shared<Request>();
    r->id = req.request_id;
    r->input.assign(req.input_ids, req.input_ids + req.input_ids_count);
    std::memcpy(&r->sampling, req.sampling, std::min<size_t>(req.sampling->struct_size, sizeof r->sampling));
    const auto& s = r->sampling;
    if (s.max_new_tokens <= 0) throw sdk::invalid_argument("max_new_tokens must be > 0");
    if (s.temperature < 0) throw sdk::invalid_argument("temperature must be >= 0");
    if (s.top_p <= 0 || s.top_p > 1) throw sdk::invalid_argument("top_p must be in (0, 1]");
    if (s.stop_strings_count > 0) throw sdk::unsupported("mock_inference has no tokenizer: stop strings are unsupported");
    // A schema is not applied (no tokenizer), but one that is not JSON is
    // refused as an engine that compiles it would refuse it.
    if (s.structured_output == AREAL_STRUCTURED_JSON_SCHEMA && !nlohmann::json::accept(std::string(sdk::view(s.json_schema))))
      throw sdk::invalid_argument("json_schema is not valid JSON");
    for (int32_t id : r->input)
      if (id < 0 || id >= vocab_) throw sdk::invalid_argument("input id " + std::to_string(id) + " is outside the vocabulary [0, " + std::to_string(vocab_) + ")");
    if (static_cast<int64_t>(r->input.size()) >= max_context_)
      throw sdk::invalid_argument("prompt of " + std::to_string(r->input.size()) + " tokens leaves no room in max_context " + std::to_string(max_context_));
    if (s.stop_token_ids != nullptr) r->stop_ids.assign(s.stop_token_ids, s.stop_token_ids + s.stop_token_ids_count);
    r->sampling.stop_token_ids = nullptr;  // borrowed pointers end with this call
    r->sampling.stop_strings = nullptr;
    r->sink = sink;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stopping_) throw sdk::unavailable("mock_inference is shutting down");
      if (live_.count(r->id)) throw sdk::Error(AREAL_CODE_ALREADY_EXISTS, "request id " + std::to_string(r->id) + " is already in flight");
      r->script_index = submitted_++;
      live_[r->id] = r;
      queue_.push_back(r);
    }
    cv_.notify_one();
  }

  void abort(uint64_t id) {
    std::shared_ptr<Request> queued;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = live_.find(id);
      if (it == live_.end()) throw sdk::not_found("no request " + std::to_string(id) + " in flight");
      it->second->aborted = true;
      // Not started yet (e.g. while paused): end it now, not at resume.
      auto q = std::find(queue_.begin(), queue_.end(), it->second);
      if (q != queue_.end()) {
        queued = *q;
        queue_.erase(q);
        live_.erase(it);
      }
    }
    cv_.notify_all();
    if (queued) queued->sink.on_done(queued->sink.ctx, AREAL_FINISH_ABORT, nullptr);
  }

  void pause() {
    std::lock_guard<std::mutex> lock(mutex_);
    paused_ = true;
  }
  void resume() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      paused_ = false;
    }
    cv_.notify_all();
  }

  void update_weights(std::string_view spec_text) {
    const json spec = sdk::parse_object(spec_text, "update_weights: spec");
    const std::string type = spec.value("type", "");
    if (type != "mock")
      throw sdk::unsupported("mock_inference has no weight files; it accepts only {\"type\":\"mock\",\"weights_seed\":N,\"version\":V}");
    if (!spec.contains("version") || !spec["version"].is_number_integer())
      throw sdk::invalid_argument("update_weights: integer 'version' is required");
    std::lock_guard<std::mutex> lock(mutex_);
    weights_seed_ = spec.value("weights_seed", weights_seed_);
    version_ = spec["version"].get<int64_t>();
  }

  int64_t version() {
    std::lock_guard<std::mutex> lock(mutex_);
    return version_;
  }
  void set_version(int64_t v) {
    std::lock_guard<std::mutex> lock(mutex_);
    version_ = v;
  }
  std::string info() {
    return json{{"model", model_}, {"vocab_size", vocab_}, {"max_context", max_context_}, {"eos_token_id", eos_}}.dump();
  }

 private:
  void worker() {
    while (true) {
      std::shared_ptr<Request> r;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        cv_.wait(lock, [&] { return stopping_ || (!paused_ && !queue_.empty()); });
        if (stopping_) return;
        r = queue_.front();
        queue_.pop_front();
      }
      // A request that fails (a sink that throws, a bug) ends with an error; the worker goes on.
      bool done = false;
      if (sdk::contain("mock_inference", [&] { run(*r, done); }) && !done) {
        {
          std::lock_guard<std::mutex> lock(mutex_);
          live_.erase(r->id);
        }
        sdk::contain("mock_inference", [&] {
          areal_status* st = sdk::host().status_new(AREAL_CODE_INTERNAL, sdk::str("mock inference failed on this request"));
          r->sink.on_done(r->sink.ctx, AREAL_FINISH_ERROR, st);
          sdk::host().status_free(st);
        });
      }
    }
  }

  // Decodes one request token by token, honouring pause and abort between
  // tokens, as a real engine does between decode steps.
  void run(Request& r, bool& done) {
    const auto& s = r.sampling;
    areal::mock::SplitMix64 rng{s.has_seed ? s.seed : r.id * 0x9e3779b97f4a7c15ULL};
    int32_t prev = r.input.back();
    const int64_t room = max_context_ - static_cast<int64_t>(r.input.size());
    const std::vector<int32_t>* scripted = script_.empty() ? nullptr : &script_[r.script_index % script_.size()];
    int64_t limit = std::min<int64_t>(s.max_new_tokens, room);
    int32_t reason = AREAL_FINISH_LENGTH;
    for (int64_t i = 0; i < limit; ++i) {
      int64_t seed, version;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        cv_.wait(lock, [&] { return !paused_ || r.aborted || stopping_; });
        seed = weights_seed_;
        version = version_;
      }
      if (r.aborted) {
        reason = AREAL_FINISH_ABORT;
        break;
      }
      if (fail_after_tokens_ > 0 && i == fail_after_tokens_) throw std::runtime_error("fail_after_tokens");  // ends it with ERROR
      if (delay_ms_ > 0) std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(delay_ms_));
      if (scripted && static_cast<size_t>(i) >= scripted->size()) {  // the script's reply is over
        reason = AREAL_FINISH_STOP;
        break;
      }
      auto row = areal::mock::log_probs(prev, vocab_, seed);
      int32_t tok = scripted ? (*scripted)[static_cast<size_t>(i)] : areal::mock::sample(row, s.temperature, s.top_k, s.top_p, rng);
      float lp = static_cast<float>(raw_logprobs_ ? row[tok] : areal::sampling::sampling_logprob(row.data(), vocab_, s.temperature, tok));
      areal_gen_chunk chunk{AREAL_OFFSET_OF_END(areal_gen_chunk, count), &tok, &lp, &version, 1};
      if (areal_status* st = r.sink.on_tokens(r.sink.ctx, &chunk)) {
        sdk::host().status_free(st);
        reason = AREAL_FINISH_ABORT;
        break;
      }
      prev = tok;
      const bool is_stop = std::find(r.stop_ids.begin(), r.stop_ids.end(), tok) != r.stop_ids.end();
      if (is_stop || (tok == eos_ && !s.ignore_eos)) {
        reason = AREAL_FINISH_STOP;
        break;
      }
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);  // before on_done: the id is unknown from then on
      live_.erase(r.id);
    }
    done = true;  // on_done is called once, whatever it does
    r.sink.on_done(r.sink.ctx, reason, nullptr);
  }

  std::string model_;
  int32_t vocab_ = 512;
  int32_t eos_ = -1;
  int64_t max_context_ = 4096;
  double delay_ms_ = 0;
  int64_t fail_after_tokens_ = 0;
  bool raw_logprobs_ = false;
  int64_t weights_seed_ = 0;
  int64_t version_ = 0;
  std::vector<std::vector<int32_t>> script_;
  size_t submitted_ = 0;

  std::mutex mutex_;
  std::condition_variable cv_;
  bool paused_ = false;
  bool stopping_ = false;
  std::deque<std::shared_ptr<Request>> queue_;
  std::map<uint64_t, std::shared_ptr<Request>> live_;
  std::vector<std::thread> threads_;
};

}  // namespace

AREAL_EXPORT_INFERENCE(MockInference)
