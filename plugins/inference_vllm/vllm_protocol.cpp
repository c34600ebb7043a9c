#include "vllm_protocol.hpp"

#include <stdexcept>
#include <cstdint>
#include <string>

namespace areal::remote {

using nlohmann::json;

json VLLMProtocol::generate_body(const Segment& seg) const {
  const Sampling& s = seg.sampling;
  json b = {{"prompt", *seg.input_ids},
            {"max_tokens", s.max_new_tokens},
            {"temperature", s.temperature},  // 0 is greedy
            {"top_p", s.top_p},
            {"ignore_eos", s.ignore_eos},
            {"logprobs", 0},  // the sampled token's log-prob only
            {"return_tokens_as_token_ids", true},
            {"skip_special_tokens", false},
            {"include_stop_str_in_output", true},
            {"stream", true},
            {"request_id", seg.rid}};
  // vLLM picks a LoRA adapter by the model field (its lora_name).
  if (!seg.adapter.empty()) b["model"] = seg.adapter;
  else if (!model_.empty()) b["model"] = model_;
  if (s.top_k > 0) b["top_k"] = s.top_k;  // absent: off (0 and -1 mean off in different versions)
  if (s.has_seed) b["seed"] = s.server_seed();
  if (!s.stop_ids.empty()) b["stop_token_ids"] = s.stop_ids;
  if (!s.stop_strings.empty()) b["stop"] = s.stop_strings;
  if (s.frequency_penalty != 0) b["frequency_penalty"] = s.frequency_penalty;
  if (s.presence_penalty != 0) b["presence_penalty"] = s.presence_penalty;
  if (!s.logit_bias.empty()) b["logit_bias"] = s.logit_bias_json();
  // vLLM's completions endpoint takes OpenAI's response_format.
  if (s.structured_output == AREAL_STRUCTURED_JSON_OBJECT) b["response_format"] = {{"type", "json_object"}};
  if (s.structured_output == AREAL_STRUCTURED_JSON_SCHEMA)
    b["response_format"] = {{"type", "json_schema"}, {"json_schema", {{"name", "output"}, {"schema", json::parse(s.json_schema)}}}};
  return b;
}

SegmentUpdate VLLMProtocol::parse_event(const json& event, size_t /*received*/) const {
  if (!event.is_object() || !event.contains("choices") || !event["choices"].is_array())
    throw std::runtime_error("a /v1/completions event without choices");
  SegmentUpdate u;
  if (event["choices"].empty()) return u;  // a usage-only chunk
  const json& c = event["choices"][0];
  if (c.contains("logprobs") && c["logprobs"].is_object()) {
    const json& lp = c["logprobs"];
    if (!lp.contains("tokens") || !lp.contains("token_logprobs") || !lp["tokens"].is_array() || !lp["token_logprobs"].is_array() ||
        lp["tokens"].size() != lp["token_logprobs"].size())
      throw std::runtime_error("choices[0].logprobs lacks matching tokens and token_logprobs");
    for (size_t i = 0; i < lp["tokens"].size(); ++i) {
      const json& tok = lp["tokens"][i];
      const std::string prefix = "token_id:";
      if (!tok.is_string() || tok.get<std::string>().rfind(prefix, 0) != 0)
        throw std::runtime_error("choices[0].logprobs.tokens holds " + tok.dump() + ", not \"token_id:N\" (was return_tokens_as_token_ids honoured?)");
      const json& v = lp["token_logprobs"][i];
      if (!v.is_number()) throw std::runtime_error("choices[0].logprobs.token_logprobs holds " + v.dump());
      u.ids.push_back(std::stoi(tok.get<std::string>().substr(prefix.size())));
      u.logprobs.push_back(v.get<float>());
    }
  } else if (c.contains("text") && c["text"].is_string() && !c["text"].get<std::string>().empty()) {
    throw std::runtime_error("a /v1/completions event with text but no logprobs (logprobs: 0 was sent)");
  }
  if (c.contains("finish_reason") && c["finish_reason"].is_string()) {
    const std::string f = c["finish_reason"];
    if (f == "stop") u.finish = Finish::kStop;
    else if (f == "length") u.finish = Finish::kLength;
    else if (f == "abort") u.finish = Finish::kAbort, u.message = "aborted by the server";
    else throw std::runtime_error("unknown finish_reason '" + f + "'");
  }
  return u;
}

void VLLMProtocol::pause(const Url& server, double timeout_s) const {
  post_control(server, routes_.pause, json::object(), timeout_s, "POST " + routes_.pause);
}

void VLLMProtocol::resume(const Url& server, double timeout_s) const {
  post_control(server, routes_.resume, json::object(), timeout_s, "POST " + routes_.resume);
}

void VLLMProtocol::update_weights_from_disk(const Url& server, const std::string& path, int64_t /*version*/, double timeout_s) const {
  // vLLM has no weight version of its own; the plugin stamps versions.
  if (routes_.launcher == VLLMLauncher::kAReaL) {
    post_control(server, routes_.update_weights, {{"model_path", path}, {"load_format", "auto"}}, timeout_s, "POST " + routes_.update_weights);
    return;
  }
  // Stock vLLM: every worker re-reads the folder's safetensors into the
  // loaded model, then cached prefixes (KV of the old weights) are dropped.
  post_control(server, routes_.update_weights, {{"method", "reload_weights"}, {"kwargs", {{"weights_path", path}}}}, timeout_s,
               "POST " + routes_.update_weights + " (reload_weights)");
  post_control(server, "/reset_prefix_cache", json::object(), timeout_s, "POST /reset_prefix_cache");
}

namespace {

// vLLM answers 404 for these routes unless started for runtime LoRA updates.
std::string lora_route_hint(const ControlError& e) {
  if (e.status != 404) return e.what();
  return std::string(e.what()) + " (start vLLM with --enable-lora and the environment variable VLLM_ALLOW_RUNTIME_LORA_UPDATING=1; docs/backends.md)";
}

}  // namespace

void VLLMProtocol::load_adapter(const Url& server, const std::string& served_name, const std::string& dir, double timeout_s) const {
  try {
    post_control(server, "/v1/load_lora_adapter", {{"lora_name", served_name}, {"lora_path", dir}}, timeout_s, "POST /v1/load_lora_adapter");
  } catch (const ControlError& e) {
    throw ControlError(e.status, lora_route_hint(e));
  }
}

void VLLMProtocol::unload_adapter(const Url& server, const std::string& served_name, double timeout_s) const {
  try {
    post_control(server, "/v1/unload_lora_adapter", {{"lora_name", served_name}}, timeout_s, "POST /v1/unload_lora_adapter");
  } catch (const ControlError& e) {
    throw ControlError(e.status, lora_route_hint(e));
  }
}

VLLMRoutes VLLMRoutes::from_config(const json& c) {
  VLLMRoutes r;
  const std::string launcher = c.value("launcher", std::string("areal"));
  if (launcher == "stock") {
    r.launcher = VLLMLauncher::kStock;
    r.pause = "/pause?mode=abort", r.resume = "/resume", r.update_weights = "/collective_rpc";
  } else if (launcher != "areal") {
    throw std::invalid_argument("vllm: launcher must be \"areal\" (AReaL's vLLM server) or \"stock\" (vLLM's api_server with VLLM_SERVER_DEV_MODE=1), got \"" + launcher + "\"");
  }
  // Schema defaults arrive as empty strings: keep the launcher's route.
  auto route = [&](const char* key, std::string& path) {
    const std::string v = c.value(key, std::string());
    if (!v.empty()) path = v;
  };
  route("pause_path", r.pause);
  route("resume_path", r.resume);
  route("update_weights_path", r.update_weights);
  return r;
}

}  // namespace areal::remote
