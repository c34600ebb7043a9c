// SGLang's native HTTP API as documented in docs/backends.md (server side):
// /generate (input_ids only, as with --skip-tokenizer-init unless the server
// has a tokenizer for "text"), /abort_request (rid prefix match),
// /pause_generation (modes abort, retract, in_place), /continue_generation,
// /update_weights_from_disk, weight versions, /health, /get_model_info,
// /v1/models, /flush_cache. Errors are {"error": {"message"}} with 400.
#include <thread>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>
#include <memory>
#include <mutex>
#include <exception>

#include "core/plugin_host/error.hpp"
#include "core/text/random_text.hpp"
#include "routes.hpp"

namespace areal::engine_server {
namespace {

class SGLangRoutes : public Routes {
 public:
  SGLangRoutes(Engine& e, ServerOptions o) : engine_(e), opt_(std::move(o)) {}

  void handle(Request& req, Response& resp) override {
    const std::string path = path_of(req);
    try {
      if (path == "/generate") return generate(req, resp);
      if (path == "/health" || path == "/health_generate") return health(resp);
      if (path == "/abort_request") {
        const Json b = read_json(req);
        const std::string rid = b.value("rid", std::string());
        // SGLang answers at once; the aborted requests end on their own streams.
        engine_.abort_matching(b.value("abort_all", false) ? std::string() : rid, false, false);
        return send_text(resp, 200, "");
      }
      if (path == "/pause_generation") {
        const Json b = read_json(req);
        const std::string mode = b.value("mode", std::string("abort"));
        if (mode != "abort" && mode != "retract" && mode != "in_place") throw HttpError{400, "mode must be abort, retract or in_place"};
        if (mode == "abort") engine_.abort_matching("");
        engine_.pause();
        return send_json(resp, 200, {{"message", "Generation paused successfully."}, {"status", "ok"}});
      }
      if (path == "/continue_generation") {
        read_json(req);
        engine_.resume();
        return send_json(resp, 200, {{"message", "Generation continued successfully."}, {"status", "ok"}});
      }
      if (path == "/update_weights_from_disk") return update_weights(req, resp);
      if (path == "/get_weight_version") return send_json(resp, 200, {{"weight_version", weight_version()}});
      if (path == "/update_weight_version") {
        const Json b = read_json(req);
        if (!b.contains("new_version") || !b["new_version"].is_string()) throw HttpError{400, "new_version (a string) is required"};
        if (b.value("abort_all_requests", true)) engine_.abort_matching("");
        set_weight_version(b["new_version"]);
        return send_json(resp, 200, {{"success", true}, {"message", "Weight version updated"}, {"new_version", b["new_version"]}});
      }
      if (path == "/get_model_info")
        return send_json(resp, 200, {{"model_path", opt_.model_name}, {"tokenizer_path", nullptr}, {"is_generation", true},
                                     {"preferred_sampling_params", nullptr}, {"weight_version", weight_version()}});
      if (path == "/v1/models")
        return send_json(resp, 200, {{"object", "list"}, {"data", Json::array({{{"id", opt_.model_name}, {"object", "model"}, {"created", 0},
                                                                                  {"owned_by", "sglang"}, {"root", opt_.model_name},
                                                                                  {"max_model_len", engine_.max_context()}}})}});
      if (path == "/flush_cache") return send_text(resp, 200, "Cache flushed.\nPlease check backend logs for more details.");
      send_json(resp, 404, {{"detail", "Not Found"}});
    } catch (const HttpError& e) {
      send_json(resp, e.status, {{"error", {{"message", e.message}}}});
    } catch (const Error& e) {
      send_json(resp, 400, {{"error", {{"message", e.what()}}}});
    }
  }

 private:
  std::string weight_version() {
    std::lock_guard<std::mutex> lock(mutex_);
    return weight_version_;
  }
  void set_weight_version(const std::string& v) {
    std::lock_guard<std::mutex> lock(mutex_);
    weight_version_ = v;
  }

  void update_weights(Request& req, Response& resp) {
    const Json b = read_json(req);
    if (!b.contains("model_path") || !b["model_path"].is_string()) throw HttpError{400, "model_path is required"};
    if (b.value("abort_all_requests", false)) engine_.abort_matching("");
    std::string version = b.contains("weight_version") && b["weight_version"].is_string() ? b["weight_version"].get<std::string>() : "";
    int64_t numeric = ++updates_;
    try {
      if (!version.empty()) numeric = std::stoll(version);
    } catch (const std::exception&) {
    }
    try {
      engine_.update_weights_from_disk(b["model_path"], numeric);
    } catch (const Error& e) {
      return send_json(resp, 400, {{"success", false}, {"message", std::string("Failed to update weights: ") + e.what()}, {"num_paused_requests", 0}});
    }
    if (!version.empty()) set_weight_version(version);
    send_json(resp, 200, {{"success", true}, {"message", "Succeeded to update model weights."}, {"num_paused_requests", 0}});
  }

  // SGLang's /health (and /health_generate) generate one token, which a
  // paused server holds until it resumes, failing after
  // SGLANG_HEALTH_CHECK_TIMEOUT (20 s): answered the same way here, so the
  // plugins' health checks meet what they meet on a real server.
  void health(Response& resp) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (engine_.paused() && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (engine_.paused()) return send_text(resp, 503, "health check timed out: generation is paused");
    send_text(resp, 200, "");
  }

  void generate(Request& req, Response& resp) {
    const Json b = read_json(req);
    if (b.contains("text") && !b["text"].is_null()) throw HttpError{400, "this engine server serves input_ids only (like --skip-tokenizer-init)"};
    if (!b.contains("input_ids") || !b["input_ids"].is_array() || b["input_ids"].empty() || !b["input_ids"][0].is_number_integer())
      throw HttpError{400, "input_ids must be a non-empty list of token ids"};
    const std::vector<int32_t> prompt = b["input_ids"].get<std::vector<int32_t>>();
    const Json sp = b.value("sampling_params", Json::object());
    SamplingRequest s;
    s.max_new_tokens = sp.value("max_new_tokens", 128);
    s.temperature = sp.value("temperature", 1.0f);
    if (s.temperature < 1e-6f) s.temperature = 0.0f;  // greedy
    s.top_p = sp.value("top_p", 1.0f);
    if (s.top_p <= 0 || s.top_p > 1) throw HttpError{400, "top_p must be in (0, 1], got " + std::to_string(s.top_p)};
    const int64_t k = sp.value("top_k", int64_t{-1});
    s.top_k = (k <= 0 || k >= (int64_t{1} << 30)) ? 0 : static_cast<int32_t>(k);
    s.ignore_eos = sp.value("ignore_eos", false);
    if (sp.contains("stop_token_ids") && sp["stop_token_ids"].is_array()) s.stop_ids = sp["stop_token_ids"].get<std::vector<int32_t>>();
    if (sp.contains("stop") && sp["stop"].is_string()) s.stop_strings = {sp["stop"].get<std::string>()};
    if (sp.contains("stop") && sp["stop"].is_array()) s.stop_strings = sp["stop"].get<std::vector<std::string>>();
    if (sp.contains("sampling_seed") && sp["sampling_seed"].is_number_integer()) s.seed = sp["sampling_seed"].get<uint64_t>();
    if (s.max_new_tokens < 0) throw HttpError{400, "max_new_tokens must be >= 0"};
    s.frequency_penalty = sp.value("frequency_penalty", 0.0f);
    s.presence_penalty = sp.value("presence_penalty", 0.0f);
    if (sp.contains("logit_bias") && sp["logit_bias"].is_object())  // {"<token id>": bias}
      for (const auto& [id, bias] : sp["logit_bias"].items()) s.logit_bias.push_back({std::stoi(id), bias.get<float>()});
    if (sp.contains("json_schema") && sp["json_schema"].is_string()) {  // SGLang takes the schema as text
      s.structured_output = AREAL_STRUCTURED_JSON_SCHEMA;
      s.json_schema = sp["json_schema"].get<std::string>();
    }
    const bool logprob = b.value("return_logprob", false), stream = b.value("stream", false);
    const std::string rid = b.contains("rid") && b["rid"].is_string() ? b["rid"].get<std::string>() : random_rid();
    const int32_t eos = engine_.eos_token_id();

    std::vector<int32_t> out;
    std::vector<float> lps;
    Json finish = nullptr;
    auto meta = [&](size_t from) {
      Json m = {{"id", rid}, {"finish_reason", finish}, {"prompt_tokens", prompt.size()}, {"completion_tokens", out.size()},
                {"cached_tokens", 0}, {"weight_version", weight_version()}};
      if (logprob) {
        Json arr = Json::array();
        for (size_t i = from; i < out.size(); ++i) arr.push_back(Json::array({lps[i], out[i], nullptr}));
        m["output_token_logprobs"] = arr;
      }
      return m;
    };
    auto body = [&](size_t from) {
      Json j = {{"output_ids", std::vector<int32_t>(out.begin() + static_cast<long>(from), out.end())}, {"meta_info", meta(from)}};
      // Without a tokenizer the server is like SGLang with --skip-tokenizer-init: no "text".
      if (engine_.has_tokenizer()) j["text"] = engine_.decode(std::vector<int32_t>(out.begin() + static_cast<long>(from), out.end()));
      return j;
    };
    if (s.max_new_tokens == 0) {  // prompt scoring: nothing to generate
      finish = {{"type", "length"}, {"length", 0}};
      if (stream) {
        SseWriter sse(resp);
        sse.event(body(0).dump()) && sse.event("[DONE]");
        return;
      }
      return send_json(resp, 200, body(0));
    }
    std::shared_ptr<Generation> g;
    try {
      g = engine_.generate(rid, prompt, s);  // throws Error -> 400
    } catch (const Error& e) {
      // SGLang compiles a request's grammar after letting it in: a schema it
      // cannot compile ends the request as an abort with status 400.
      if (!stream || s.structured_output == 0 || e.code() != AREAL_CODE_INVALID_ARGUMENT) throw;
      finish = {{"type", "abort"}, {"message", std::string("Failed to compile the grammar: ") + e.what()}, {"status_code", 400}, {"err_type", "BadRequestError"}};
      SseWriter sse(resp);
      sse.event(body(0).dump()) && sse.event("[DONE]");
      return;
    }
    std::unique_ptr<SseWriter> sse;
    if (stream) sse = std::make_unique<SseWriter>(resp);
    size_t sent = 0;
    Event e;
    while (g->next(e)) {
      out.insert(out.end(), e.ids.begin(), e.ids.end());
      lps.insert(lps.end(), e.logprobs.begin(), e.logprobs.end());
      if (e.done) {
        if (e.finish == AREAL_FINISH_STOP) {
          const int32_t last = out.empty() ? -1 : out.back();
          finish = (is_stop_id(s, last) || last == eos) ? Json{{"type", "stop"}, {"matched", last}} : Json{{"type", "stop"}, {"matched", s.stop_strings.empty() ? "" : s.stop_strings[0]}};
        } else if (e.finish == AREAL_FINISH_LENGTH) {
          finish = {{"type", "length"}, {"length", out.size()}};
        } else if (e.finish == AREAL_FINISH_ABORT) {
          finish = {{"type", "abort"}, {"message", "Abort in waiting queue"}, {"status_code", 200}, {"err_type", nullptr}};
        } else {
          if (sse) {
            // SGLang's own stream error is {"error": {"message"}} for a request's
            // ValueError; a backend failure adds its status, as vLLM's does.
            sse->event(Json{{"error", {{"message", e.error}, {"code", 500}}}}.dump()) && sse->event("[DONE]");
            return;
          }
          return send_json(resp, 500, {{"error", {{"message", e.error}}}});
        }
      }
      if (sse && (!e.ids.empty() || e.done)) {
        const size_t from = opt_.incremental_stream ? sent : 0;
        sent = out.size();
        if (!sse->event(body(from).dump())) {  // the client left: SGLang aborts the request
          return engine_.abort_and_drain(g);
        }
      }
    }
    if (sse) {
      return (void)sse->event("[DONE]");
    }
    send_json(resp, 200, body(0));
  }

  static std::string random_rid() {
    static std::atomic<uint64_t> n{0};
    return "rid-" + text::random_hex(8) + "-" + std::to_string(++n);
  }

  Engine& engine_;
  ServerOptions opt_;
  std::mutex mutex_;
  std::string weight_version_ = "default";
  std::atomic<int64_t> updates_{0};
};

}  // namespace

std::unique_ptr<Routes> make_sglang_routes(Engine& engine, const ServerOptions& options) {
  return std::make_unique<SGLangRoutes>(engine, options);
}

}  // namespace areal::engine_server
