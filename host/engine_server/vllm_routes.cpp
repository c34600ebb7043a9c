// vLLM's OpenAI-compatible server as documented in docs/backends.md (server
// side): /v1/completions with token-id prompts (streamed or not;
// return_tokens_as_token_ids, return_token_ids, logprobs), abort on client
// disconnect, /v1/models, /health; the dev-mode /pause?mode=, /resume,
// /is_paused, /abort_requests; and AReaL's launcher routes
// /areal_pause_generation, /areal_continue_generation, /areal_update_weights.
// Errors are {"error": {"message", "type", "param", "code"}}.
#include <atomic>
#include <ctime>
#include <cstdint>
#include <string>
#include <vector>
#include <memory>

#include "core/plugin_host/error.hpp"
#include "routes.hpp"

namespace areal::engine_server {
namespace {

Json error_body(int status, const std::string& message) {
  return {{"error", {{"message", message}, {"type", status >= 500 ? "InternalServerError" : status == 404 ? "NotFoundError" : "BadRequestError"}, {"param", nullptr}, {"code", status}}}};
}

class VLLMRoutes : public Routes {
 public:
  VLLMRoutes(Engine& e, ServerOptions o) : engine_(e), opt_(std::move(o)) {}

  void handle(Request& req, Response& resp) override {
    const std::string path = path_of(req);
    try {
      if (path == "/v1/completions") return completions(req, resp);
      if (path == "/health") return send_text(resp, 200, "");
      if (path == "/v1/models")
        return send_json(resp, 200, {{"object", "list"}, {"data", Json::array({{{"id", opt_.model_name}, {"object", "model"}, {"created", 0},
                                                                                  {"owned_by", "vllm"}, {"root", opt_.model_name}, {"parent", nullptr},
                                                                                  {"max_model_len", engine_.max_context()}}})}});
      if (path == "/pause") {  // dev mode
        const auto q = query(req);
        const std::string mode = q.count("mode") ? q.at("mode") : "abort";
        if (mode == "abort") engine_.abort_matching("");
        else if (mode == "wait") engine_.wait_idle();
        else if (mode != "keep") throw HttpError{400, "mode must be abort, wait or keep"};
        engine_.pause();
        return send_json(resp, 200, {{"status", "paused"}});
      }
      if (path == "/resume") {
        engine_.resume();
        return send_json(resp, 200, {{"status", "resumed"}});
      }
      // vLLM's runtime LoRA API (VLLM_ALLOW_RUNTIME_LORA_UPDATING): a PEFT
      // folder this server can read, by name; requests name it as `model`.
      if (path == "/v1/load_lora_adapter" || path == "/v1/unload_lora_adapter") {
        const Json b = read_json(req);
        if (!b.contains("lora_name") || !b["lora_name"].is_string()) throw HttpError{400, "lora_name is required"};
        const std::string name = b["lora_name"];
        if (path == "/v1/unload_lora_adapter") {
          engine_.unload_adapter(name);
          return send_text(resp, 200, "Success: LoRA adapter '" + name + "' removed successfully.");
        }
        if (!b.contains("lora_path") || !b["lora_path"].is_string()) throw HttpError{400, "lora_path is required"};
        engine_.load_adapter(name, b["lora_path"]);
        return send_text(resp, 200, "Success: LoRA adapter '" + name + "' added successfully.");
      }
      if (path == "/is_paused") return send_json(resp, 200, {{"is_paused", engine_.paused()}});
      if (path == "/abort_requests") {
        const Json b = read_json(req);
        const auto ids = b.value("request_ids", std::vector<std::string>{});
        if (ids.empty()) engine_.abort_matching("", false, false);
        for (const auto& id : ids) engine_.abort_matching(id, true, false);
        return send_json(resp, 200, Json::object());
      }
      if (path == "/areal_pause_generation") {
        engine_.abort_matching("");
        engine_.pause();
        return send_json(resp, 200, {{"success", true}, {"message", "Generation paused and all requests aborted."}});
      }
      if (path == "/areal_continue_generation") {
        engine_.resume();
        return send_json(resp, 200, {{"success", true}, {"message", "Generation continued."}});
      }
      if (path == "/areal_update_weights") {
        const Json b = read_json(req);
        if (!b.contains("model_path") || !b["model_path"].is_string()) throw HttpError{400, "model_path is required"};
        try {
          engine_.update_weights_from_disk(b["model_path"], ++updates_);
        } catch (const Error& e) {
          return send_json(resp, 400, {{"success", false}, {"message", e.what()}});
        }
        return send_json(resp, 200, {{"success", true}, {"message", "Weights updated from " + b["model_path"].get<std::string>()}});
      }
      send_json(resp, 404, {{"detail", "Not Found"}});
    } catch (const HttpError& e) {
      send_json(resp, e.status, error_body(e.status, e.message));
    } catch (const Error& e) {
      send_json(resp, 400, error_body(400, e.what()));
    }
  }

 private:
  void completions(Request& req, Response& resp) {
    const Json b = read_json(req);
    if (!b.contains("prompt")) throw HttpError{400, "prompt is required"};
    Json prompt_json = b["prompt"];
    if (prompt_json.is_array() && prompt_json.size() == 1 && prompt_json[0].is_array()) prompt_json = prompt_json[0];
    if (!prompt_json.is_array() || prompt_json.empty() || !prompt_json[0].is_number_integer())
      throw HttpError{400, "this engine server takes prompts as token ids (a non-empty list of integers); it has no tokenizer for text prompts"};
    const std::vector<int32_t> prompt = prompt_json.get<std::vector<int32_t>>();
    for (int32_t id : prompt)
      if (id < 0) throw HttpError{400, "token ids must be >= 0"};
    if (b.value("n", 1) != 1) throw HttpError{400, "this engine server supports n = 1 only"};
    std::string adapter;  // `model` names the base, or a loaded LoRA adapter
    if (b.contains("model") && b["model"].is_string() && b["model"] != opt_.model_name) {
      if (!engine_.has_adapter(b["model"])) throw HttpError{404, "The model `" + b["model"].get<std::string>() + "` does not exist."};
      adapter = b["model"];
    }
    auto number = [&](const char* key, double fallback) {
      return b.contains(key) && b[key].is_number() ? b[key].get<double>() : fallback;  // null: the default
    };
    SamplingRequest s;
    s.max_new_tokens = static_cast<int32_t>(number("max_tokens", 16));
    if (s.max_new_tokens < 1) throw HttpError{400, "max_tokens must be at least 1, got " + std::to_string(s.max_new_tokens)};
    s.temperature = static_cast<float>(number("temperature", 1.0));
    if (s.temperature < 1e-5f) s.temperature = 0.0f;  // greedy
    s.top_p = static_cast<float>(number("top_p", 1.0));
    if (s.top_p <= 0 || s.top_p > 1) throw HttpError{400, "top_p must be in (0, 1], got " + std::to_string(s.top_p)};
    const double k = number("top_k", 0);
    s.top_k = k <= 0 ? 0 : static_cast<int32_t>(k);
    if (b.contains("seed") && b["seed"].is_number_integer()) s.seed = b["seed"].get<uint64_t>();
    s.ignore_eos = b.value("ignore_eos", false);
    if (b.contains("stop_token_ids") && b["stop_token_ids"].is_array()) s.stop_ids = b["stop_token_ids"].get<std::vector<int32_t>>();
    if (b.contains("stop") && b["stop"].is_string()) s.stop_strings = {b["stop"].get<std::string>()};
    if (b.contains("stop") && b["stop"].is_array()) s.stop_strings = b["stop"].get<std::vector<std::string>>();
    s.frequency_penalty = static_cast<float>(number("frequency_penalty", 0.0));
    s.presence_penalty = static_cast<float>(number("presence_penalty", 0.0));
    if (b.contains("logit_bias") && b["logit_bias"].is_object())  // {"<token id>": bias}
      for (const auto& [tid, bias] : b["logit_bias"].items()) s.logit_bias.push_back({std::stoi(tid), bias.get<float>()});
    if (b.contains("response_format") && b["response_format"].is_object()) {  // OpenAI's form
      const Json& rf = b["response_format"];
      if (rf.value("type", "") == "json_object") s.structured_output = AREAL_STRUCTURED_JSON_OBJECT;
      if (rf.value("type", "") == "json_schema") {
        if (!rf.contains("json_schema") || !rf["json_schema"].is_object() || !rf["json_schema"].contains("schema"))
          throw HttpError{400, "response_format json_schema needs json_schema.schema"};
        s.structured_output = AREAL_STRUCTURED_JSON_SCHEMA;
        s.json_schema = rf["json_schema"]["schema"].dump();
      }
    }
    s.adapter = adapter;
    const bool stream = b.value("stream", false);
    const bool want_logprobs = b.contains("logprobs") && b["logprobs"].is_number_integer();
    const bool as_ids = b.value("return_tokens_as_token_ids", false), return_ids = b.value("return_token_ids", false);
    const std::string id = "cmpl-" + (b.contains("request_id") && b["request_id"].is_string() ? b["request_id"].get<std::string>() : std::to_string(++counter_));
    const std::string rid = b.contains("request_id") && b["request_id"].is_string() ? b["request_id"].get<std::string>() : id;
    const int64_t created = static_cast<int64_t>(std::time(nullptr));
    const int32_t eos = engine_.eos_token_id();

    std::shared_ptr<Generation> g = engine_.generate(rid, prompt, s);
    std::vector<int32_t> out;
    std::vector<float> lps;
    size_t text_offset = 0;  // characters of text already returned (chunks are built in order)
    auto logprobs_of = [&](size_t from) -> Json {
      if (!want_logprobs) return nullptr;
      Json tokens = Json::array(), values = Json::array(), tops = Json::array(), offsets = Json::array();
      size_t& offset = text_offset;
      for (size_t i = from; i < out.size(); ++i) {
        const std::string tok = as_ids ? "token_id:" + std::to_string(out[i]) : engine_.decode({out[i]});
        tokens.push_back(tok);
        values.push_back(lps[i]);
        tops.push_back(Json{{tok, lps[i]}});
        offsets.push_back(offset);
        offset += engine_.decode({out[i]}).size();
      }
      return {{"text_offset", offsets}, {"token_logprobs", values}, {"tokens", tokens}, {"top_logprobs", tops}};
    };
    auto choice = [&](size_t from, Json finish, Json stop_reason) {
      const std::vector<int32_t> ids(out.begin() + static_cast<long>(from), out.end());
      Json c = {{"index", 0}, {"text", engine_.decode(ids)}, {"logprobs", logprobs_of(from)},
                {"finish_reason", finish}, {"stop_reason", stop_reason}};
      if (return_ids) {
        c["token_ids"] = ids;
        if (from == 0) c["prompt_token_ids"] = prompt;
      }
      return c;
    };
    std::unique_ptr<SseWriter> sse;
    if (stream) sse = std::make_unique<SseWriter>(resp);
    size_t sent = 0;
    Json finish = nullptr, stop_reason = nullptr;
    Event e;
    while (g->next(e)) {
      out.insert(out.end(), e.ids.begin(), e.ids.end());
      lps.insert(lps.end(), e.logprobs.begin(), e.logprobs.end());
      if (e.done) {
        if (e.finish == AREAL_FINISH_STOP) {
          finish = "stop";
          const int32_t last = out.empty() ? -1 : out.back();
          if (is_stop_id(s, last) && last != eos) stop_reason = last;
          else if (last != eos && !s.stop_strings.empty()) stop_reason = s.stop_strings[0];
        } else if (e.finish == AREAL_FINISH_LENGTH) {
          finish = "length";
        } else if (e.finish == AREAL_FINISH_ABORT) {
          finish = "abort";
        } else {
          if (sse) {
            sse->event(error_body(500, e.error).dump()) && sse->event("[DONE]");
            return;
          }
          return send_json(resp, 500, error_body(500, e.error));
        }
      }
      if (sse && (!e.ids.empty() || e.done)) {
        Json chunk = {{"id", id}, {"object", "text_completion"}, {"created", created}, {"model", opt_.model_name},
                      {"choices", Json::array({choice(sent, finish, stop_reason)})}, {"usage", nullptr}};
        sent = out.size();
        if (!sse->event(chunk.dump())) {  // disconnected: vLLM aborts the request
          return engine_.abort_and_drain(g);
        }
      }
    }
    if (sse) {
      return (void)sse->event("[DONE]");
    }
    send_json(resp, 200, {{"id", id}, {"object", "text_completion"}, {"created", created}, {"model", opt_.model_name},
                          {"choices", Json::array({choice(0, finish, stop_reason)})},
                          {"usage", {{"prompt_tokens", prompt.size()}, {"completion_tokens", out.size()}, {"total_tokens", prompt.size() + out.size()}}}});
  }

  Engine& engine_;
  ServerOptions opt_;
  std::atomic<int64_t> updates_{0}, counter_{0};
};

}  // namespace

std::unique_ptr<Routes> make_vllm_routes(Engine& engine, const ServerOptions& options) {
  return std::make_unique<VLLMRoutes>(engine, options);
}

}  // namespace areal::engine_server
