#include "remote_engine.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <string_view>
#include <stdexcept>
#include <exception>
#include <cstring>
#include <filesystem>

#include <Poco/Exception.h>

#include "areal/sdk.hpp"
#include "areal/sdk_json.hpp"
#include "core/text/random_text.hpp"
#include "peft_folder.hpp"

namespace areal::remote {

namespace sdk = areal::sdk;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

EngineOptions EngineOptions::from_json(const json& c) {
  EngineOptions o;
  if (!c.contains("servers") || !c["servers"].is_array() || c["servers"].empty())
    throw sdk::invalid_argument("'servers' is required: a list of base URLs such as [\"http://127.0.0.1:30000\"]");
  for (const auto& s : c["servers"]) {
    if (!s.is_string()) throw sdk::invalid_argument("'servers' holds strings");
    o.servers.push_back(s.get<std::string>());
  }
  o.model = c.value("model", std::string());
  o.max_context = c.value("max_context", int64_t{0});
  o.connect_timeout_s = c.value("connect_timeout_s", 5.0);
  o.idle_timeout_s = c.value("idle_timeout_s", 600.0);
  o.control_timeout_s = c.value("control_timeout_s", 600.0);
  o.max_retries = c.value("max_retries", 3);
  o.retry_backoff_s = c.value("retry_backoff_s", 0.5);
  o.health_check_interval_s = c.value("health_check_interval_s", 5.0);
  o.startup_timeout_s = c.value("startup_timeout_s", 60.0);
  o.pause_drain_timeout_s = c.value("pause_drain_timeout_s", 30.0);
  o.verify_logprobs = c.value("verify_logprobs", true);
  o.max_concurrency = c.value("max_concurrency", 1024);
  o.adapter_dir = c.value("adapter_dir", std::string());
  return o;
}

json post_control(const Url& server, const std::string& path, const json& body, double timeout_s, const std::string& what) {
  HttpResult r;
  try {
    r = http_call(server, "POST", path, body.dump(), timeout_s);
  } catch (const Poco::Exception& e) {
    throw ControlError(0, what + " on " + server.text + " failed: " + e.displayText());
  } catch (const std::exception& e) {
    throw ControlError(0, what + " on " + server.text + " failed: " + e.what());
  }
  if (r.status != 200) throw ControlError(r.status, what + " on " + server.text + " answered " + std::to_string(r.status) + ": " + error_message(r.body));
  json j = json::parse(r.body, nullptr, false);
  if (j.is_discarded()) return json();
  if (j.is_object() && j.contains("success") && j["success"] == false)
    throw ControlError(r.status, what + " on " + server.text + " failed: " + j.value("message", std::string("no message")));
  return j;
}

struct RemoteEngine::Job {
  uint64_t id = 0;
  std::vector<int32_t> tokens;  // prompt, then every token received
  size_t prompt_size = 0;
  Sampling sampling;
  std::string affinity;
  areal_gen_sink sink{};
  std::atomic<bool> aborted{false};
  std::mutex call_mutex;  // guards call/server/rid for abort()
  StreamCall* call = nullptr;
  int server = -1;
  std::string rid;
  std::string adapter_name;                      // as named, or the default adapter's at submit; empty with base_model
  bool base_model = false;                       // no adapter named and no default at submit: the base model throughout
  std::shared_ptr<const RemoteAdapter> adapter;  // what its last segment used (worker thread only)
};

namespace {

// The next server-sent event's payload ("data: X" -> X); false at the end
// of the stream or at "[DONE]".
bool next_event(StreamCall& call, std::string& payload) {
  std::string line;
  while (call.read_line(line)) {
    if (line.rfind("data:", 0) != 0) continue;
    payload = line.substr(line.size() > 5 && line[5] == ' ' ? 6 : 5);
    return payload != "[DONE]";
  }
  return false;
}

std::vector<Url> parse_servers(const std::vector<std::string>& texts) {
  std::vector<Url> out;
  for (const auto& t : texts) {
    try {
      out.push_back(parse_url(t));
    } catch (const std::invalid_argument& e) {
      throw sdk::invalid_argument(std::string("servers: ") + e.what());
    }
  }
  return out;
}

}  // namespace

RemoteEngine::RemoteEngine(std::unique_ptr<BackendProtocol> protocol, EngineOptions options)
    : protocol_(std::move(protocol)), opt_(std::move(options)), pool_(parse_servers(opt_.servers)), rid_prefix_("areal-" + text::random_hex(8)) {
  wait_for_servers();
  if (opt_.verify_logprobs) verify_logprob_convention();
  if (opt_.max_context == 0) opt_.max_context = fetch_max_context();
  health_ = sdk::guarded_thread(protocol_->name() + ".health", [this] { health_loop(); });
}

RemoteEngine::~RemoteEngine() {
  std::vector<std::shared_ptr<Job>> live, queued;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    for (auto& [_, j] : live_) live.push_back(j);
    queued.assign(queue_.begin(), queue_.end());
    queue_.clear();
  }
  for (auto& j : live) {
    j->aborted = true;
    std::lock_guard<std::mutex> lock(j->call_mutex);
    if (j->call) j->call->cancel();
  }
  cv_.notify_all();
  health_cv_.notify_all();
  for (auto& t : workers_) t.join();
  if (health_.joinable()) health_.join();
  for (auto& j : queued) sdk::contain(protocol_->name(), [&] { j->sink.on_done(j->sink.ctx, AREAL_FINISH_ABORT, nullptr); });
  // Folders written for the servers; they loaded them already.
  std::error_code ignored;
  if (adapter_root_owned_) std::filesystem::remove_all(adapter_root_, ignored);
}

void RemoteEngine::count(const char* what) const {
  sdk::host().metric_add(sdk::str(std::string("areal_inference_") + what + "_total{backend=\"" + protocol_->name() + "\"}"), 1.0);
}

void RemoteEngine::log(int level, const std::string& message) const {
  sdk::log(static_cast<areal_log_level>(level), protocol_->name(), message);
}

void RemoteEngine::wait_for_servers() {
  const auto deadline = Clock::now() + std::chrono::duration<double>(opt_.startup_timeout_s);
  for (size_t i = 0; i < pool_.size(); ++i) {
    std::string last;
    // A run that died between pause and resume (killed while saving) leaves
    // its servers paused: SGLang's /health then times out (its probe
    // generates a token), vLLM's says 200 and every request hangs. Both take
    // a resume when not paused, so one goes to each server as soon as it answers.
    bool resumed = false;
    auto resume_once = [&](bool last_try) {
      if (resumed) return;
      try {
        protocol_->resume(pool_.url(i), opt_.connect_timeout_s);
        resumed = true;
      } catch (const std::exception& e) {  // not up yet: tried again with the next health check
        if (last_try)
          log(AREAL_LOG_WARN, "server " + pool_.url(i).text + ": resume at start failed (" + e.what() + "); if an earlier run left it paused, it stays so");
      }
    };
    while (true) {
      resume_once(false);  // before the health check: SGLang's waits on a paused server
      try {
        const HttpResult r = http_call(pool_.url(i), "GET", protocol_->health_path(), "", opt_.connect_timeout_s);
        if (r.status == 200) {
          resume_once(true);
          break;
        }
        last = "answered " + std::to_string(r.status) + ": " + error_message(r.body);
      } catch (const Poco::Exception& e) {
        last = e.displayText();
      } catch (const std::exception& e) {
        last = e.what();
      }
      if (Clock::now() >= deadline)
        throw sdk::unavailable(protocol_->name() + ": server " + pool_.url(i).text + " did not answer " + protocol_->health_path() +
                               " within startup_timeout_s (" + std::to_string(opt_.startup_timeout_s) + " s); last error: " + last +
                               ". Start the server first, or raise startup_timeout_s.");
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  }
}

// The ABI wants log-probs of softmax(logits / T). One-token requests per
// server tell the conventions apart: greedy gives the argmax token's raw
// log-prob lp0; at temperature 0.5 with top_k 2 the same token, when sampled
// (seeds are tried until it is), has log-prob lp0 only when the server
// reports raw (temperature-1) values. (SGLang: temperature-scaled, differs;
// vLLM processed_logprobs: renormalised over the top 2, differs.) top_k is 2,
// not 1: SGLang runs a batch whose every request has top_k <= 1 down its
// greedy path, which reports raw log-probs whatever the temperature. A flat
// distribution (lp0 near 0) cannot tell.
void RemoteEngine::verify_logprob_convention() {
  const std::vector<int32_t> prompt{0};
  for (size_t i = 0; i < pool_.size(); ++i) {
    auto one = [&](float temperature, int32_t top_k, uint64_t seed) {
      Segment seg;
      seg.rid = rid_prefix_ + "-probe-" + std::to_string(i) + "-" + std::to_string(top_k) + "-" + std::to_string(seed);
      seg.input_ids = &prompt;
      seg.sampling.temperature = temperature;
      seg.sampling.top_k = top_k;
      seg.sampling.max_new_tokens = 1;
      seg.sampling.ignore_eos = true;
      seg.sampling.has_seed = true;
      seg.sampling.seed = seed;
      StreamCall call(pool_.url(i), opt_.connect_timeout_s, opt_.idle_timeout_s);
      std::pair<int32_t, float> got{-1, 0.0f};
      try {
        const int status = call.post(protocol_->generate_path(), protocol_->generate_body(seg).dump());
        if (status != 200) throw std::runtime_error("answered " + std::to_string(status) + ": " + error_message(call.read_rest()));
        std::string payload;
        size_t received = 0;
        while (next_event(call, payload)) {
          const SegmentUpdate u = protocol_->parse_event(json::parse(payload), received);
          for (size_t k = 0; k < u.ids.size(); ++k) got = {u.ids[k], u.logprobs[k]};
          received += u.ids.size();
        }
      } catch (const Poco::Exception& e) {
        throw sdk::unavailable(protocol_->name() + ": log-prob check on " + pool_.url(i).text + " failed: " + e.displayText());
      } catch (const std::exception& e) {
        throw sdk::unavailable(protocol_->name() + ": log-prob check on " + pool_.url(i).text + " failed: " + e.what());
      }
      if (got.first < 0) throw sdk::unavailable(protocol_->name() + ": log-prob check on " + pool_.url(i).text + " returned no token");
      return got;
    };
    const auto greedy = one(0.0f, 0, 1);
    if (greedy.second > -1e-3f) {
      log(AREAL_LOG_WARN, "server " + pool_.url(i).text + ": the probe distribution is too peaked to check the log-prob convention; assuming it is right");
      continue;
    }
    std::pair<int32_t, float> cool{-1, 0.0f};
    for (uint64_t seed = 1; seed <= 8 && cool.first != greedy.first; ++seed) cool = one(0.5f, 2, seed);
    if (cool.first != greedy.first) {
      log(AREAL_LOG_WARN, "server " + pool_.url(i).text + ": the probe never sampled the greedy token at temperature 0.5; the log-prob convention is not checked");
      continue;
    }
    if (std::abs(cool.second - greedy.second) < 1e-4f)
      throw sdk::Error(AREAL_CODE_FAILED_PRECONDITION,
                       protocol_->name() + ": server " + pool_.url(i).text +
                           " reports raw (temperature 1) log-probs, but training needs log-probs of the sampling distribution "
                           "softmax(logits / temperature) (the same token's log-prob was " + std::to_string(greedy.second) +
                           " at temperature 0 and at temperature 0.5). Fix: " + protocol_->logprob_fix() +
                           "; or set verify_logprobs: false and sample only at temperature 1.");
  }
}

int64_t RemoteEngine::fetch_max_context() {
  try {
    const HttpResult r = http_call(pool_.url(0), "GET", "/v1/models", "", opt_.connect_timeout_s);
    const json j = json::parse(r.body, nullptr, false);
    if (r.status == 200 && j.is_object() && j.contains("data") && j["data"].is_array() && !j["data"].empty()) {
      const json& m = j["data"][0];
      if (opt_.model.empty() && m.contains("id") && m["id"].is_string()) opt_.model = m["id"];
      if (m.contains("max_model_len") && m["max_model_len"].is_number_integer()) return m["max_model_len"].get<int64_t>();
    }
  } catch (const std::exception&) {
  }
  log(AREAL_LOG_WARN, "could not read max_model_len from " + pool_.url(0).text + "/v1/models; assuming 32768 (set max_context)");
  return 32768;
}

void RemoteEngine::submit(const areal_gen_request& req, const areal_gen_sink& sink) {
  if (req.input_ids == nullptr || req.input_ids_count == 0) throw sdk::invalid_argument("input_ids must not be empty");
  if (req.sampling == nullptr) throw sdk::invalid_argument("sampling params are required");
  if (sink.on_tokens == nullptr || sink.on_done == nullptr) throw sdk::invalid_argument("sink callbacks are required");
  areal_sampling_params s{};
  std::memcpy(&s, req.sampling, std::min<size_t>(req.sampling->struct_size, sizeof s));
  if (s.max_new_tokens <= 0) throw sdk::invalid_argument("max_new_tokens must be > 0");
  if (s.temperature < 0) throw sdk::invalid_argument("temperature must be >= 0");
  if (s.top_p <= 0 || s.top_p > 1) throw sdk::invalid_argument("top_p must be in (0, 1]");
  auto job = std::make_shared<Job>();
  job->id = req.request_id;
  job->tokens.assign(req.input_ids, req.input_ids + req.input_ids_count);
  for (int32_t id : job->tokens)
    if (id < 0) throw sdk::invalid_argument("input id " + std::to_string(id) + " is negative");
  if (static_cast<int64_t>(job->tokens.size()) >= opt_.max_context)
    throw sdk::invalid_argument("prompt of " + std::to_string(job->tokens.size()) + " tokens leaves no room in max_context " + std::to_string(opt_.max_context));
  job->prompt_size = job->tokens.size();
  Sampling& out = job->sampling;
  out.temperature = s.temperature;
  out.top_p = s.top_p;
  out.top_k = s.top_k;
  out.max_new_tokens = static_cast<int32_t>(std::min<int64_t>(s.max_new_tokens, opt_.max_context - static_cast<int64_t>(job->prompt_size)));
  out.has_seed = s.has_seed != 0;
  out.seed = s.seed;
  out.ignore_eos = s.ignore_eos != 0;
  if (s.stop_token_ids) out.stop_ids.assign(s.stop_token_ids, s.stop_token_ids + s.stop_token_ids_count);
  for (size_t i = 0; s.stop_strings && i < s.stop_strings_count; ++i) {
    out.stop_strings.emplace_back(sdk::view(s.stop_strings[i]));
    try {  // servers take JSON: a stop string that is not UTF-8 is the caller's mistake, not a server failure
      (void)json(out.stop_strings.back()).dump();
    } catch (const json::exception&) {
      throw sdk::invalid_argument("stop string " + std::to_string(i) + " is not valid UTF-8");
    }
  }
  out.frequency_penalty = s.frequency_penalty;
  out.presence_penalty = s.presence_penalty;
  for (size_t i = 0; s.logit_bias && i < s.logit_bias_count; ++i) out.logit_bias.emplace_back(s.logit_bias[i].token_id, s.logit_bias[i].bias);
  out.structured_output = s.structured_output;
  out.json_schema = std::string(sdk::view(s.json_schema));
  if (out.structured_output == AREAL_STRUCTURED_JSON_SCHEMA && nlohmann::json::parse(out.json_schema, nullptr, false).is_discarded())
    throw sdk::invalid_argument("json_schema is not JSON");
  job->affinity = std::string(sdk::view(req.affinity_key));
  if (req.struct_size >= AREAL_OFFSET_OF_END(areal_gen_request, adapter)) job->adapter_name = std::string(sdk::view(req.adapter));
  if (!job->adapter_name.empty()) {
    if (!protocol_->serves_adapters()) throw sdk::unsupported(protocol_->name() + " serves no LoRA adapters (request names '" + job->adapter_name + "')");
    std::shared_ptr<const RemoteAdapter> probe;
    if (!adapters_.resolve(job->adapter_name, probe)) throw sdk::not_found("no adapter '" + job->adapter_name + "' is loaded");
  }
  // Bound now: a request naming no adapter finishes with the default it
  // started with (its newer versions included), or with the base model,
  // whatever becomes the default meanwhile (the ABI's "requests in flight
  // finish with it"; the local engine binds the same way).
  if (job->adapter_name.empty()) job->adapter_name = adapters_.default_name();
  job->base_model = job->adapter_name.empty();
  job->sink = sink;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) throw sdk::unavailable(protocol_->name() + " is shutting down");
    if (live_.count(job->id)) throw sdk::Error(AREAL_CODE_ALREADY_EXISTS, "request id " + std::to_string(job->id) + " is already in flight");
    // One worker per queued request, up to max_concurrency; idle workers
    // count only until they wake, so compare with the queue, not with zero.
    if (queue_.size() + 1 > idle_workers_ && workers_.size() < static_cast<size_t>(opt_.max_concurrency)) {
      try {
        workers_.push_back(sdk::guarded_thread(protocol_->name(), [this] { worker(); }));
      } catch (const std::system_error& e) {  // out of threads: refuse now, never call the sink later
        if (workers_.empty()) throw sdk::unavailable(protocol_->name() + ": cannot start a worker thread: " + e.what());
      }
    }
    live_[job->id] = job;
    queue_.push_back(job);
  }
  cv_.notify_all();
}

void RemoteEngine::worker() {
  while (true) {
    std::shared_ptr<Job> job;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      ++idle_workers_;
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      --idle_workers_;
      if (stopping_) return;
      job = queue_.front();
      queue_.pop_front();
    }
    // A request that throws (a bug, memory) ends with an error; the worker goes on.
    bool done = false;
    if (sdk::contain(protocol_->name(), [&] { run(*job, done); }) && !done) {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        live_.erase(job->id);
      }
      sdk::contain(protocol_->name(), [&] {
        areal_status* st = sdk::host().status_new(AREAL_CODE_INTERNAL, sdk::str(protocol_->name() + ": the request failed inside the engine (see the log)"));
        job->sink.on_done(job->sink.ctx, AREAL_FINISH_ERROR, st);
        sdk::host().status_free(st);
      });
    }
  }
}

void RemoteEngine::run(Job& job, bool& done) {
  int32_t finish = 0;
  std::string error;
  int32_t error_code = AREAL_CODE_UNAVAILABLE;
  int failures = 0, fruitless_aborts = 0;
  size_t segment = 0;
  while (finish == 0) {
    int64_t version;
    uint64_t epoch;
    std::string adapter;  // the servers' name of the segment's adapter
    {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [&] { return !paused_ || job.aborted || stopping_; });
      if (job.aborted || stopping_) {
        finish = AREAL_FINISH_ABORT;
        break;
      }
      // Each segment takes the adapter's newest version (loads happen paused).
      if (job.base_model) {
        job.adapter.reset();
      } else if (!adapters_.resolve(job.adapter_name, job.adapter)) {
        finish = AREAL_FINISH_ERROR, error_code = AREAL_CODE_NOT_FOUND, error = "adapter '" + job.adapter_name + "' was unloaded";
        break;
      }
      version = job.adapter ? job.adapter->version : version_;
      if (job.adapter) adapter = job.adapter->served_name;
      epoch = pause_epoch_;
      ++segments_in_flight_;
    }
    SegmentResult r = run_segment(job, version, epoch, segment++, adapter);
    bool paused_meanwhile;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      paused_meanwhile = pause_epoch_ != epoch;
      if (--segments_in_flight_ == 0) drained_.notify_all();
    }
    const int64_t produced = static_cast<int64_t>(job.tokens.size() - job.prompt_size);
    if (r.tokens > 0) failures = 0, fruitless_aborts = 0;
    switch (r.outcome) {
      case Outcome::kStop: finish = AREAL_FINISH_STOP; break;
      case Outcome::kLength: finish = AREAL_FINISH_LENGTH; break;
      case Outcome::kClientError:
        if (produced > 0 && segment > 1) {
          // The request was let in; its continuation after a pause is refused
          // (SGLang keeps a margin below the context): it ends where it got to.
          log(AREAL_LOG_INFO, "request " + std::to_string(job.id) + ": its continuation was refused (" + r.message + "); it ends with its " +
                                  std::to_string(produced) + " tokens as length");
          finish = AREAL_FINISH_LENGTH;
        } else {
          finish = AREAL_FINISH_ERROR, error_code = AREAL_CODE_INVALID_ARGUMENT, error = r.message;
        }
        break;
      case Outcome::kAbort:
        if (job.aborted) {
          finish = AREAL_FINISH_ABORT;
        } else if (!paused_meanwhile && r.tokens == 0 && ++fruitless_aborts > opt_.max_retries) {
          finish = AREAL_FINISH_ERROR, error = protocol_->name() + " server aborted the request " + std::to_string(fruitless_aborts) +
                                               " times without output: " + r.message;
        }
        if (finish == 0) count("resubmits");
        break;  // otherwise resubmitted (after resume when paused)
      case Outcome::kServerError:
        if (job.aborted) {
          finish = AREAL_FINISH_ABORT;
        } else if (paused_meanwhile) {
          count("resubmits");  // a stream cut by pause: resubmitted after resume
        } else if (++failures > opt_.max_retries) {
          finish = AREAL_FINISH_ERROR;
          error = protocol_->name() + ": the request failed " + std::to_string(failures) + " times (" + r.message + "); servers: " + pool_.describe();
        } else {
          count("retries");
          const double delay = std::min(8.0, opt_.retry_backoff_s * std::pow(2.0, failures - 1));
          log(AREAL_LOG_WARN, "request " + std::to_string(job.id) + ": " + r.message + "; retry " + std::to_string(failures) + " in " +
                                  std::to_string(delay) + " s");
          std::unique_lock<std::mutex> lock(mutex_);
          cv_.wait_for(lock, std::chrono::duration<double>(delay), [&] { return job.aborted.load() || stopping_; });
        }
        break;
    }
    if (finish == 0 && produced >= job.sampling.max_new_tokens) finish = AREAL_FINISH_LENGTH;
  }
  {
    // Before on_done: from then on the id is unknown (abort says NOT_FOUND).
    std::lock_guard<std::mutex> lock(mutex_);
    live_.erase(job.id);
  }
  done = true;  // on_done is called once, whatever it does
  if (finish == AREAL_FINISH_ERROR) {
    count("request_errors");
    log(AREAL_LOG_ERROR, "request " + std::to_string(job.id) + " failed: " + error);
    areal_status* st = sdk::host().status_new(error_code, sdk::str(error));
    job.sink.on_done(job.sink.ctx, finish, st);
    sdk::host().status_free(st);
  } else {
    job.sink.on_done(job.sink.ctx, finish, nullptr);
  }
  // A retired adapter leaves the servers once its last request is done.
  if (job.adapter) {
    job.adapter.reset();
    release_retired_adapters();
  }
}

RemoteEngine::SegmentResult RemoteEngine::run_segment(Job& job, int64_t version, uint64_t epoch, size_t index, const std::string& adapter) {
  SegmentResult result;
  const int64_t produced = static_cast<int64_t>(job.tokens.size() - job.prompt_size);
  Segment seg;
  char rid[96];
  std::snprintf(rid, sizeof rid, "%s-%020llu-%04zu", rid_prefix_.c_str(), static_cast<unsigned long long>(job.id), index);
  seg.rid = rid;
  seg.input_ids = &job.tokens;
  seg.sampling = job.sampling;
  seg.adapter = adapter;
  seg.sampling.max_new_tokens = static_cast<int32_t>(job.sampling.max_new_tokens - produced);
  if (index > 0 && seg.sampling.has_seed) seg.sampling.seed += index;  // a fresh stream, not a replay of the first
  const int server = pool_.acquire(job.affinity, adapter);
  if (server < 0) {
    result.message = adapter.empty() ? "no server is up" : "no server that is up has adapter '" + adapter + "' loaded";
    return result;
  }
  StreamCall call(pool_.url(server), opt_.connect_timeout_s, opt_.idle_timeout_s);
  {
    std::lock_guard<std::mutex> lock(mutex_);  // pause() reads calls under the same locks, in this order
    std::lock_guard<std::mutex> call_lock(job.call_mutex);
    job.call = &call, job.server = server, job.rid = seg.rid;
    if (job.aborted || pause_epoch_ != epoch) call.cancel();
  }
  const std::string where = pool_.url(server).text;
  bool server_failed = false;
  try {
    const int status = call.post(protocol_->generate_path(), protocol_->generate_body(seg).dump());
    if (status != 200) {
      const std::string msg = where + " answered " + std::to_string(status) + ": " + error_message(call.read_rest());
      if (status >= 400 && status < 500 && status != 408 && status != 429) {
        result.outcome = Outcome::kClientError;
      } else {
        server_failed = true;
      }
      result.message = msg;
    } else {
      std::string payload;
      bool finished = false;
      std::vector<int64_t> versions;
      while (next_event(call, payload)) {
        const json event = json::parse(payload);
        if (event.is_object() && event.contains("error")) {
          // A server that failed mid-stream says so with a 5xx code: the
          // request goes to another server; otherwise it is the request's fault.
          if (error_is_server_side(payload)) server_failed = true;
          else result.outcome = Outcome::kClientError;
          result.message = where + ": " + error_message(payload);
          finished = true;
          break;
        }
        SegmentUpdate u = protocol_->parse_event(event, result.tokens);
        const size_t room = static_cast<size_t>(seg.sampling.max_new_tokens) - result.tokens;
        if (u.ids.size() > room) u.ids.resize(room), u.logprobs.resize(room);
        if (!u.ids.empty()) {
          versions.assign(u.ids.size(), version);
          areal_gen_chunk chunk{AREAL_OFFSET_OF_END(areal_gen_chunk, count), u.ids.data(), u.logprobs.data(), versions.data(), u.ids.size()};
          job.tokens.insert(job.tokens.end(), u.ids.begin(), u.ids.end());
          result.tokens += u.ids.size();
          // A sink that throws ends this request (as if it asked for an abort), never the server.
          areal_status* sink_status = nullptr;
          if (sdk::contain(protocol_->name(), [&] { sink_status = job.sink.on_tokens(job.sink.ctx, &chunk); }))
            sink_status = sdk::host().status_new(AREAL_CODE_INTERNAL, sdk::str("the token sink failed"));
          if (areal_status* st = sink_status) {
            sdk::host().status_free(st);
            job.aborted = true;
            call.cancel();
            result.outcome = Outcome::kAbort;
            finished = true;
            break;
          }
        }
        if (u.finish != Finish::kNone) {
          finished = true;
          result.outcome = u.finish == Finish::kStop ? Outcome::kStop : u.finish == Finish::kLength ? Outcome::kLength : Outcome::kAbort;
          result.message = u.message;
          // An abort with a status is a refusal, not an interruption: a 4xx is
          // the request's (not retried), a 5xx the server's (another takes it).
          if (u.finish == Finish::kAbort && u.status >= 400) {
            result.message = where + " ended the request with status " + std::to_string(u.status) + ": " + u.message;
            if (u.status >= 500 || u.status == 408 || u.status == 429) server_failed = true;
            else result.outcome = Outcome::kClientError;
          }
        }
      }
      if (!finished) {
        if (job.aborted || call.cancelled()) {
          result.outcome = Outcome::kAbort;
        } else {
          server_failed = true;
          result.message = where + ": the stream ended without a finish reason";
        }
      }
    }
  } catch (const Poco::Exception& e) {
    server_failed = !job.aborted && !call.cancelled();
    result.outcome = server_failed ? Outcome::kServerError : Outcome::kAbort;
    result.message = where + ": " + e.displayText();
  } catch (const json::exception& e) {
    server_failed = true;
    result.message = where + ": malformed stream event: " + e.what();
  } catch (const std::exception& e) {
    server_failed = !job.aborted && !call.cancelled();
    result.outcome = server_failed ? Outcome::kServerError : Outcome::kAbort;
    result.message = where + ": " + e.what();
  }
  {
    std::lock_guard<std::mutex> lock(job.call_mutex);
    job.call = nullptr;
  }
  pool_.release(server);
  if (server_failed) {
    result.outcome = Outcome::kServerError;
    // A stream cut by our own pause is not the server's fault.
    bool pausing;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      pausing = paused_;
    }
    if (!pausing) {
      count("server_failures");
      pool_.mark_down(server, result.message);
      log(AREAL_LOG_WARN, "server " + where + " taken out of rotation: " + result.message);
    }
  }
  return result;
}

void RemoteEngine::abort(uint64_t id) {
  std::shared_ptr<Job> job;
  bool queued = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = live_.find(id);
    if (it == live_.end()) throw sdk::not_found("no request " + std::to_string(id) + " in flight");
    job = it->second;
    job->aborted = true;
    auto q = std::find(queue_.begin(), queue_.end(), job);
    if (q != queue_.end()) {  // not started yet: end it now
      queue_.erase(q);
      live_.erase(it);
      queued = true;
    }
  }
  cv_.notify_all();  // wakes a request waiting out a pause or a retry delay
  if (queued) {
    job->sink.on_done(job->sink.ctx, AREAL_FINISH_ABORT, nullptr);
    return;
  }
  std::string rid;
  int server = -1;
  {
    std::lock_guard<std::mutex> call_lock(job->call_mutex);
    if (job->call) job->call->cancel(), rid = job->rid, server = job->server;
  }
  if (server >= 0) {
    try {
      protocol_->abort(pool_.url(server), rid, opt_.connect_timeout_s);
    } catch (const std::exception&) {  // best effort: the closed stream already ends it
    }
  }
}

void RemoteEngine::pause() {
  std::lock_guard<std::mutex> control(control_mutex_);
  pause_locked();
}

void RemoteEngine::pause_locked() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (paused_) return;
    paused_ = true;
    ++pause_epoch_;
  }
  for (size_t i = 0; i < pool_.size(); ++i) {
    // A server that is down gets no requests: no call that could hang for
    // control_timeout_s (a hung server, a dead host) holds up the step. It
    // is held: the health loop sends it a resume before it serves again.
    if (!pool_.healthy(static_cast<int>(i))) {
      pool_.set_held(static_cast<int>(i), true);
      continue;
    }
    try {
      protocol_->pause(pool_.url(i), opt_.control_timeout_s);
    } catch (const std::exception& e) {
      log(AREAL_LOG_WARN, std::string("pause: ") + e.what());
    }
  }
  // The servers aborted what they ran, but a request that reached a server
  // just after its abort is held there until resume: close every stream
  // still open (a segment that registers later sees the new epoch and closes
  // itself). Tokens not yet read are dropped, never half-delivered: the
  // request is resubmitted from what its sink received.
  std::vector<std::pair<int, std::string>> to_abort;
  std::unique_lock<std::mutex> lock(mutex_);
  for (auto& [_, j] : live_) {
    std::lock_guard<std::mutex> call_lock(j->call_mutex);
    if (j->call) {
      j->call->cancel();
      to_abort.emplace_back(j->server, j->rid);
    }
  }
  lock.unlock();
  for (const auto& [server, rid] : to_abort) {
    try {
      protocol_->abort(pool_.url(server), rid, opt_.connect_timeout_s);
    } catch (const std::exception&) {  // best effort: the stream is closed already
    }
  }
  lock.lock();
  if (!drained_.wait_for(lock, std::chrono::duration<double>(opt_.pause_drain_timeout_s), [&] { return segments_in_flight_ == 0; }))
    log(AREAL_LOG_WARN, "pause: " + std::to_string(segments_in_flight_) + " segments still running after pause_drain_timeout_s");
}

void RemoteEngine::resume() {
  std::lock_guard<std::mutex> control(control_mutex_);
  resume_locked();
}

void RemoteEngine::resume_locked() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!paused_) return;
  }
  for (size_t i = 0; i < pool_.size(); ++i) {
    if (!pool_.healthy(static_cast<int>(i))) {  // the health loop resumes it once it answers
      pool_.set_held(static_cast<int>(i), true);
      continue;
    }
    try {
      protocol_->resume(pool_.url(i), opt_.control_timeout_s);
      pool_.set_held(static_cast<int>(i), false);
    } catch (const std::exception& e) {
      // Still paused there: keep it out of rotation (a health check would not
      // tell) and let the health loop retry the resume.
      log(AREAL_LOG_WARN, std::string("resume: ") + e.what() + "; the server gets no requests until a resume reaches it");
      pool_.set_held(static_cast<int>(i), true);
    }
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    paused_ = false;
  }
  cv_.notify_all();
}

class RemoteEngine::ControlPause {
 public:
  explicit ControlPause(RemoteEngine& engine) : engine_(engine), control_(engine.control_mutex_) {
    {
      std::lock_guard<std::mutex> lock(engine.mutex_);
      was_paused_ = engine.paused_;
    }
    if (!was_paused_) engine.pause_locked();
  }
  ~ControlPause() {
    if (!was_paused_) sdk::contain(engine_.protocol_->name(), [&] { engine_.resume_locked(); });
  }
  ControlPause(const ControlPause&) = delete;
  ControlPause& operator=(const ControlPause&) = delete;

 private:
  RemoteEngine& engine_;
  std::lock_guard<std::mutex> control_;
  bool was_paused_ = false;
};

void RemoteEngine::update_weights(std::string_view spec_text) {
  const json spec = sdk::parse_object(spec_text, "update_weights: spec");
  const std::string type = spec.value("type", "");
  if (type == "nccl" || type == "distributed")
    throw sdk::unsupported(protocol_->name() + ": weight updates over NCCL need a CUDA build of libtorch, which this build lacks; use {\"type\": \"disk\"}");
  if (type != "disk") throw sdk::unsupported(protocol_->name() + " updates weights from disk: {\"type\": \"disk\", \"path\": DIR, \"version\": N}");
  if (!spec.contains("path") || !spec["path"].is_string() || !spec.contains("version") || !spec["version"].is_number_integer())
    throw sdk::invalid_argument("update_weights: string 'path' and integer 'version' are required");
  const std::string path = spec["path"];
  const int64_t version = spec["version"];
  // A segment must never span two weight versions: paused around the
  // update, under the control lock so a concurrent pause, resume or update
  // cannot interleave.
  ControlPause paused(*this);
  std::string failures;
  size_t updated = 0;
  for (size_t i = 0; i < pool_.size(); ++i) {
    if (!pool_.healthy(static_cast<int>(i))) {  // the health loop gives it these weights when it is back
      pool_.set_stale(static_cast<int>(i), true);
      failures += std::string(failures.empty() ? "" : "; ") + pool_.url(i).text + " is down";
      continue;
    }
    try {
      protocol_->update_weights_from_disk(pool_.url(i), path, version, opt_.control_timeout_s);
      pool_.set_stale(static_cast<int>(i), false);
      ++updated;
    } catch (const std::exception& e) {
      // Serving the old weights under the new version would corrupt training data.
      pool_.set_stale(static_cast<int>(i), true);
      failures += std::string(failures.empty() ? "" : "; ") + e.what();
    }
  }
  if (updated > 0) {
    last_disk_update_ = std::make_pair(path, version);
    std::lock_guard<std::mutex> lock(mutex_);
    version_ = version;
  }
  if (!failures.empty()) {
    const std::string msg = "update_weights to version " + std::to_string(version) + " failed on " + std::to_string(pool_.size() - updated) +
                            " of " + std::to_string(pool_.size()) + " servers (they get no requests until an update reaches them): " + failures;
    if (updated == 0) throw sdk::unavailable(msg);
    log(AREAL_LOG_ERROR, msg);
  }
}

int64_t RemoteEngine::version() {
  std::lock_guard<std::mutex> lock(mutex_);
  return version_;
}

void RemoteEngine::set_version(int64_t v) {
  std::lock_guard<std::mutex> lock(mutex_);
  version_ = v;
}

std::string RemoteEngine::info() {
  json servers = json::array();
  for (const auto& s : opt_.servers) servers.push_back(s);
  json out = {{"model", opt_.model.empty() ? protocol_->name() : opt_.model}, {"max_context", opt_.max_context}, {"backend", protocol_->name()},
              {"servers", servers}, {"server_states", pool_.describe()}};
  if (protocol_->serves_adapters()) out["adapters"] = true, out["loaded_adapters"] = adapters_.describe();
  return out.dump();
}

std::string RemoteEngine::adapter_folder_for(const std::string& name, int64_t version, const std::string& served_name) {
  namespace fs = std::filesystem;
  if (adapter_root_.empty()) {
    if (!opt_.adapter_dir.empty()) {
      adapter_root_ = fs::absolute(opt_.adapter_dir).string();
    } else {
      adapter_root_ = (fs::temp_directory_path() / (rid_prefix_ + "-adapters")).string();
      adapter_root_owned_ = true;
    }
    fs::create_directories(adapter_root_);
  }
  // The load number keeps names unique; characters a path cannot hold become '_'.
  std::string leaf = name + "-v" + std::to_string(version) + "-" + served_name.substr(served_name.rfind('@') + 1);
  for (char& c : leaf)
    if (c == '/' || c == '\\' || static_cast<unsigned char>(c) < 32) c = '_';
  return (fs::path(adapter_root_) / leaf).string();
}

void RemoteEngine::load_served_adapter(std::string_view spec_text, const areal_tensor_map* tensors) {
  namespace fs = std::filesystem;
  const json spec = sdk::parse_object(spec_text, "load_adapter: spec");
  if (!spec.contains("name") || !spec["name"].is_string() || spec["name"].get<std::string>().empty())
    throw sdk::invalid_argument("load_adapter: 'name' (a non-empty string) is required");
  if (!spec.contains("version") || !spec["version"].is_number_integer()) throw sdk::invalid_argument("load_adapter: integer 'version' is required");
  if (spec.contains("default") && !spec["default"].is_boolean()) throw sdk::invalid_argument("load_adapter: 'default' must be a boolean");
  auto adapter = std::make_shared<RemoteAdapter>();
  adapter->name = spec["name"];
  adapter->version = spec["version"];
  adapter->served_name = adapters_.new_served_name(adapter->name);
  const bool has_tensors = tensors != nullptr && tensors->count > 0;
  if (spec.contains("path")) {
    if (!spec["path"].is_string()) throw sdk::invalid_argument("load_adapter: 'path' must be a string");
    if (has_tensors) throw sdk::invalid_argument("load_adapter: give 'path' or tensors with 'config', not both");
    // Absolute: the servers do not share our working folder.
    adapter->dir = fs::absolute(spec["path"].get<std::string>()).lexically_normal().string();
    if (!fs::exists(fs::path(adapter->dir) / "adapter_config.json"))
      throw sdk::invalid_argument("load_adapter: " + adapter->dir + " is not a PEFT adapter folder (no adapter_config.json)");
    adapter->source = adapter->dir;
  } else if (spec.contains("config")) {
    if (!has_tensors) throw sdk::invalid_argument("load_adapter: 'config' comes with the adapter's tensors, and none were given");
    adapter->dir = adapter_folder_for(adapter->name, adapter->version, adapter->served_name);
    write_peft_folder(adapter->dir, spec["config"], *tensors);
    adapter->owned_dir = true;
    adapter->source = "memory";
  } else {
    throw sdk::invalid_argument("load_adapter: the spec needs 'path' (a PEFT adapter folder) or 'config' with the tensors");
  }
  // Like a weight update: no segment runs while the servers change, and
  // interrupted segments resume with the new adapter.
  std::string failures;
  {  // paused while the servers load it
    ControlPause paused(*this);
    bool refused = false;  // a server answered 4xx: the adapter's fault, not the server's
    std::vector<size_t> loaded_on;
    for (size_t i = 0; i < pool_.size(); ++i) {
      try {
        protocol_->load_adapter(pool_.url(i), adapter->served_name, adapter->dir, opt_.control_timeout_s);
        loaded_on.push_back(i);
      } catch (const ControlError& e) {
        refused = refused || (e.status >= 400 && e.status < 500);
        failures += std::string(failures.empty() ? "" : "; ") + e.what();
      } catch (const std::exception& e) {
        failures += std::string(failures.empty() ? "" : "; ") + e.what();
      }
    }
    if (loaded_on.size() < pool_.size() && (refused || loaded_on.empty())) {
      // Nothing changes: unload it where it did load.
      for (size_t i : loaded_on) {
        try {
          protocol_->unload_adapter(pool_.url(i), adapter->served_name, opt_.control_timeout_s);
        } catch (const std::exception& e) {
          log(AREAL_LOG_WARN, std::string("load_adapter: undoing a partial load: ") + e.what());
        }
      }
      std::error_code ignored;
      if (adapter->owned_dir) fs::remove_all(adapter->dir, ignored);
      const std::string msg = "load_adapter '" + adapter->name + "' (version " + std::to_string(adapter->version) + "): " + failures;
      if (refused) throw sdk::invalid_argument(msg);
      throw sdk::unavailable(msg);
    }
    // Servers that missed it get no request for it (they would answer 404,
    // or serve the base model); they keep serving everything else.
    for (size_t i = 0; i < pool_.size(); ++i)
      pool_.set_missing_adapter(static_cast<int>(i), adapter->served_name, std::find(loaded_on.begin(), loaded_on.end(), i) == loaded_on.end());
    log(AREAL_LOG_INFO, "adapter '" + adapter->name + "' version " + std::to_string(adapter->version) + " loaded as '" + adapter->served_name + "' from " +
                            adapter->dir + (spec.value("default", false) ? " (the default adapter)" : ""));
    adapters_.install(std::move(adapter), spec.value("default", false));
  }
  if (!failures.empty()) log(AREAL_LOG_ERROR, "load_adapter: some servers failed and get no requests until a later load reaches them: " + failures);
  release_retired_adapters();
}

void RemoteEngine::unload_served_adapter(std::string_view name) {
  if (!adapters_.uninstall(std::string(name))) throw sdk::not_found("unload_adapter: no adapter '" + std::string(name) + "' is loaded");
  release_retired_adapters();
}

void RemoteEngine::release_retired_adapters() {
  for (const auto& a : adapters_.take_unused_retired()) {
    for (size_t i = 0; i < pool_.size(); ++i) {
      try {
        protocol_->unload_adapter(pool_.url(i), a->served_name, opt_.control_timeout_s);
      } catch (const std::exception& e) {  // the server keeps an unused name; nothing is served wrong
        log(AREAL_LOG_WARN, "unloading retired adapter '" + a->served_name + "': " + e.what());
      }
    }
    pool_.forget_adapter(a->served_name);
    std::error_code ignored;
    if (a->owned_dir) std::filesystem::remove_all(a->dir, ignored);
  }
}

void RemoteEngine::health_loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    health_cv_.wait_for(lock, std::chrono::duration<double>(opt_.health_check_interval_s), [&] { return stopping_; });
    if (stopping_) return;
    lock.unlock();
    for (size_t i = 0; i < pool_.size(); ++i) {
      const int s = static_cast<int>(i);
      bool engine_paused;
      uint64_t epoch;
      {
        std::lock_guard<std::mutex> state(mutex_);
        engine_paused = paused_;
        epoch = pause_epoch_;
      }
      // SGLang's /health generates one token, which a paused server holds
      // until it resumes: a probe now would take a healthy server out of
      // rotation, and the requests resubmitted at resume would find none.
      if (engine_paused) continue;
      if (pool_.held(s)) {  // its resume failed: it is still paused there, so a probe would hang too
        std::unique_lock<std::mutex> control(control_mutex_, std::try_to_lock);  // not during a pause/update
        if (!control.owns_lock()) continue;
        try {
          // connect_timeout_s: the control lock is held, and a pause or update waits for it.
          protocol_->resume(pool_.url(i), opt_.connect_timeout_s);
          pool_.set_held(s, false);
          log(AREAL_LOG_INFO, "server " + pool_.url(i).text + " resumed; back in rotation");
        } catch (const std::exception& e) {
          // Said once a round only for a server that answers otherwise; one that is down was reported so.
          log(pool_.healthy(s) ? AREAL_LOG_WARN : AREAL_LOG_DEBUG, "server " + pool_.url(i).text + ": resume still fails: " + e.what());
        }
        continue;
      }
      std::string why;
      try {
        const HttpResult r = http_call(pool_.url(i), "GET", protocol_->health_path(), "", std::min(opt_.connect_timeout_s, opt_.health_check_interval_s + 1));
        if (r.status != 200) why = protocol_->health_path() + " answered " + std::to_string(r.status);
      } catch (const Poco::Exception& e) {
        why = e.displayText();
      } catch (const std::exception& e) {
        why = e.what();
      }
      if (!why.empty()) {
        std::lock_guard<std::mutex> state(mutex_);
        if (paused_ || pause_epoch_ != epoch) continue;  // a pause began while it probed: no verdict
      }
      if (why.empty()) {
        if (pool_.healthy(s)) continue;
        // Back from down. If it restarted it serves the weights it was
        // launched with, which tokens tagged with the current version must
        // not come from: the last update goes to it before it serves again.
        std::unique_lock<std::mutex> control(control_mutex_, std::try_to_lock);  // not during a pause/update
        if (!control.owns_lock()) continue;  // decided next round
        if (last_disk_update_) {
          try {
            protocol_->update_weights_from_disk(pool_.url(i), last_disk_update_->first, last_disk_update_->second, opt_.control_timeout_s);
            pool_.set_stale(s, false);
          } catch (const std::exception& e) {
            pool_.set_stale(s, true);  // no requests until an update reaches it
            log(AREAL_LOG_WARN, "server " + pool_.url(i).text + " is reachable again but could not load the current weights (version " +
                                    std::to_string(last_disk_update_->second) + "): " + e.what() + "; it gets no requests until a weight update reaches it");
          }
        }
        // A restarted server has lost every adapter: each current one is
        // loaded again, or the server gets no request for it.
        for (const auto& a : adapters_.current()) {
          try {
            protocol_->load_adapter(pool_.url(i), a->served_name, a->dir, opt_.control_timeout_s);
            pool_.set_missing_adapter(s, a->served_name, false);
          } catch (const std::exception& e) {
            // "already loaded" (vLLM's 400): the server never went away and has it.
            const bool has_it = std::string(e.what()).find("already") != std::string::npos;
            pool_.set_missing_adapter(s, a->served_name, !has_it);
            if (!has_it) log(AREAL_LOG_WARN, "server " + pool_.url(i).text + " is back but could not load adapter '" + a->served_name + "': " + e.what());
          }
        }
        pool_.mark_up(s);
        log(AREAL_LOG_INFO, "server " + pool_.url(i).text + " is back in rotation");
      } else if (pool_.healthy(s)) {
        pool_.mark_down(s, why);
        log(AREAL_LOG_WARN, "server " + pool_.url(i).text + " failed its health check: " + why);
      }
    }
    lock.lock();
  }
}

}  // namespace areal::remote
