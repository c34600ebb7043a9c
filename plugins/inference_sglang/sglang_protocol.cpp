#include "sglang_protocol.hpp"

#include <stdexcept>
#include <cstdint>
#include <string>

namespace areal::remote {

using nlohmann::json;

json SGLangProtocol::generate_body(const Segment& seg) const {
  const Sampling& s = seg.sampling;
  json sp = {{"max_new_tokens", s.max_new_tokens},
             {"temperature", s.temperature},  // below 1e-6 SGLang decodes greedily
             {"top_p", s.top_p},
             {"top_k", s.top_k > 0 ? s.top_k : -1},
             {"ignore_eos", s.ignore_eos},
             {"skip_special_tokens", false},
             {"no_stop_trim", true}};
  if (!s.stop_ids.empty()) sp["stop_token_ids"] = s.stop_ids;
  if (!s.stop_strings.empty()) sp["stop"] = s.stop_strings;
  if (s.has_seed) sp["sampling_seed"] = s.server_seed();
  if (s.frequency_penalty != 0) sp["frequency_penalty"] = s.frequency_penalty;
  if (s.presence_penalty != 0) sp["presence_penalty"] = s.presence_penalty;
  if (!s.logit_bias.empty()) sp["logit_bias"] = s.logit_bias_json();
  // SGLang's grammar backend takes the schema as text; a JSON object is the schema {"type": "object"}.
  if (s.structured_output == AREAL_STRUCTURED_JSON_OBJECT) sp["json_schema"] = R"({"type": "object"})";
  if (s.structured_output == AREAL_STRUCTURED_JSON_SCHEMA) sp["json_schema"] = s.json_schema;
  return {{"rid", seg.rid}, {"input_ids", *seg.input_ids}, {"sampling_params", sp}, {"return_logprob", true}, {"stream", true}};
}

SegmentUpdate SGLangProtocol::parse_event(const json& event, size_t received) const {
  if (!event.is_object() || !event.contains("meta_info") || !event["meta_info"].is_object())
    throw std::runtime_error("a /generate event without meta_info");
  const json& meta = event["meta_info"];
  SegmentUpdate u;
  // Token ids from the log-prob triples, as AReaL reads them: robust across
  // versions that name output_ids differently.
  if (meta.contains("output_token_logprobs")) {
    const json& lps = meta["output_token_logprobs"];
    if (!lps.is_array()) throw std::runtime_error("meta_info.output_token_logprobs is not a list");
    for (size_t i = incremental_ ? 0 : received; i < lps.size(); ++i) {
      const json& t = lps[i];
      if (!t.is_array() || t.size() < 2 || !t[0].is_number() || !t[1].is_number_integer())
        throw std::runtime_error("meta_info.output_token_logprobs holds a malformed entry: " + t.dump());
      u.logprobs.push_back(t[0].get<float>());
      u.ids.push_back(t[1].get<int32_t>());
    }
  } else if (meta.contains("finish_reason") && !meta["finish_reason"].is_null() && meta["finish_reason"].value("type", "") != "abort") {
    throw std::runtime_error("a finished /generate event without meta_info.output_token_logprobs (return_logprob was sent)");
  }
  if (meta.contains("finish_reason") && meta["finish_reason"].is_object()) {
    const std::string type = meta["finish_reason"].value("type", "");
    if (type == "stop") u.finish = Finish::kStop;
    else if (type == "length") u.finish = Finish::kLength;
    else if (type == "abort") {
      u.finish = Finish::kAbort, u.message = meta["finish_reason"].value("message", std::string("aborted"));
      // SGLang ends a request it refuses (a schema its grammar backend cannot
      // compile, an input over its context) as an abort with a status.
      if (meta["finish_reason"].contains("status_code") && meta["finish_reason"]["status_code"].is_number_integer())
        u.status = meta["finish_reason"]["status_code"].get<int>();
    }
    else throw std::runtime_error("unknown finish_reason type '" + type + "'");
  }
  return u;
}

void SGLangProtocol::pause(const Url& server, double timeout_s) const {
  // {"mode": "abort"} is the newest default; older servers take no body, and {} suits both.
  post_control(server, "/pause_generation", json::object(), timeout_s, "POST /pause_generation");
}

void SGLangProtocol::resume(const Url& server, double timeout_s) const {
  post_control(server, "/continue_generation", json::object(), timeout_s, "POST /continue_generation");
}

void SGLangProtocol::update_weights_from_disk(const Url& server, const std::string& path, int64_t version, double timeout_s) const {
  post_control(server, "/update_weights_from_disk",
               {{"model_path", path}, {"weight_version", std::to_string(version)}, {"abort_all_requests", false}}, timeout_s,
               "POST /update_weights_from_disk");
}

void SGLangProtocol::abort(const Url& server, const std::string& rid, double timeout_s) const {
  post_control(server, "/abort_request", {{"rid", rid}}, timeout_s, "POST /abort_request");
}

}  // namespace areal::remote
