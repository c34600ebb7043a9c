#include "areal/core/proxy/chat_request.hpp"

#include <cmath>

#include "areal/core/error.hpp"

namespace areal::proxy {
namespace {

using J = nlohmann::ordered_json;

[[noreturn]] void bad(const std::string& param, const std::string& why) {
  throw Error(AREAL_CODE_INVALID_ARGUMENT, "'" + param + "': " + why);
}

double number(const J& body, const char* key, double lo, double hi) {
  const J& v = body[key];
  if (!v.is_number()) bad(key, "must be a number");
  const double d = v.get<double>();
  if (!std::isfinite(d) || d < lo || d > hi) bad(key, "must be between " + std::to_string(lo) + " and " + std::to_string(hi));
  return d;
}

int64_t integer(const J& body, const char* key, int64_t lo, int64_t hi) {
  const J& v = body[key];
  if (!v.is_number_integer()) bad(key, "must be an integer");
  const int64_t i = v.get<int64_t>();
  if (i < lo || i > hi) bad(key, "must be between " + std::to_string(lo) + " and " + std::to_string(hi));
  return i;
}

bool present(const J& body, const char* key) { return body.contains(key) && !body[key].is_null(); }

void check_messages(const J& messages) {
  if (!messages.is_array() || messages.empty()) bad("messages", "must be a non-empty array");
  for (size_t i = 0; i < messages.size(); ++i) {
    const J& m = messages[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) bad(where, "must be an object");
    if (!m.contains("role") || !m["role"].is_string()) bad(where + ".role", "is required");
    const std::string role = m["role"];
    if (role != "system" && role != "developer" && role != "user" && role != "assistant" && role != "tool")
      bad(where + ".role", "must be system, developer, user, assistant or tool, got '" + role + "'");
    const bool has_content = m.contains("content") && !m["content"].is_null();
    if (has_content && !m["content"].is_string() && !m["content"].is_array())
      bad(where + ".content", "must be a string or an array of content parts");
    if (!has_content && !(role == "assistant" && m.contains("tool_calls")))
      bad(where + ".content", "is required");
    if (role == "tool" && !m.contains("tool_call_id")) bad(where + ".tool_call_id", "is required for tool messages");
  }
}

}  // namespace

ChatRequest parse_chat_request(const J& body) {
  ChatRequest r;
  if (!body.contains("messages")) bad("messages", "is required");
  check_messages(body["messages"]);
  r.messages = body["messages"];
  // Content parts -> text: the templates we serve take strings.
  for (auto& m : r.messages) {
    if (!m.contains("content") || !m["content"].is_array()) continue;
    std::string text;
    for (const auto& part : m["content"]) {
      if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text"))
        bad("messages[].content", "only text content parts are supported (no images or audio)");
      text += part["text"].get<std::string>();
    }
    m["content"] = text;
  }
  if (present(body, "model")) {
    if (!body["model"].is_string()) bad("model", "must be a string");
    r.model = body["model"];
  }
  if (present(body, "tools")) {
    if (!body["tools"].is_array()) bad("tools", "must be an array");
    for (const auto& t : body["tools"])
      if (!t.is_object() || t.value("type", "") != "function" || !t.contains("function") || !t["function"].contains("name"))
        bad("tools", "each tool must be {\"type\": \"function\", \"function\": {\"name\": ...}}");
    if (!body["tools"].empty()) r.tools = body["tools"];
  }
  if (present(body, "tool_choice")) {
    const J& tc = body["tool_choice"];
    if (tc.is_string()) {
      r.tool_choice = tc;
      if (r.tool_choice != "none" && r.tool_choice != "auto" && r.tool_choice != "required")
        bad("tool_choice", "must be none, auto, required or a named function");
    } else if (tc.is_object() && tc.contains("function") && tc["function"].contains("name")) {
      r.tool_choice = tc["function"]["name"];
    } else {
      bad("tool_choice", "must be none, auto, required or {\"type\": \"function\", \"function\": {\"name\": ...}}");
    }
    if (r.tool_choice == "required" || (r.tool_choice != "none" && r.tool_choice != "auto"))
      bad("tool_choice", "forcing a tool call needs constrained decoding, which this backend does not do; use auto");
  }
  if (present(body, "n") && integer(body, "n", 1, 1) != 1) bad("n", "only n=1 is supported");
  if (present(body, "temperature")) r.temperature = static_cast<float>(number(body, "temperature", 0, 2));
  if (present(body, "top_p")) r.top_p = static_cast<float>(number(body, "top_p", 1e-9, 1));
  if (present(body, "top_k")) r.top_k = static_cast<int32_t>(integer(body, "top_k", -1, 1 << 20));
  if (r.top_k < 0) r.top_k = 0;
  if (present(body, "max_tokens") && present(body, "max_completion_tokens"))
    bad("max_tokens", "give max_tokens or max_completion_tokens, not both");
  if (present(body, "max_tokens")) r.max_tokens = integer(body, "max_tokens", 1, int64_t{1} << 40);
  if (present(body, "max_completion_tokens")) r.max_tokens = integer(body, "max_completion_tokens", 1, int64_t{1} << 40);
  if (present(body, "stop")) {
    const J& s = body["stop"];
    if (s.is_string()) r.stop.push_back(s);
    else if (s.is_array() && s.size() <= 16) {
      for (const auto& x : s) {
        if (!x.is_string() || x.get<std::string>().empty()) bad("stop", "must hold non-empty strings");
        r.stop.push_back(x);
      }
    } else {
      bad("stop", "must be a string or an array of up to 16 strings");
    }
  }
  if (present(body, "seed")) {
    if (!body["seed"].is_number_integer()) bad("seed", "must be an integer");
    r.seed = static_cast<uint64_t>(body["seed"].get<int64_t>());
  }
  if (present(body, "logprobs")) {
    if (!body["logprobs"].is_boolean()) bad("logprobs", "must be a boolean");
    r.logprobs = body["logprobs"];
  }
  if (present(body, "top_logprobs")) {
    r.top_logprobs = static_cast<int32_t>(integer(body, "top_logprobs", 0, 20));
    if (r.top_logprobs > 0) bad("top_logprobs", "alternatives are not returned by the inference backends yet; use logprobs: true");
  }
  if (present(body, "store")) {
    if (!body["store"].is_boolean()) bad("store", "must be a boolean");
    r.store = body["store"];
  }
  if (present(body, "stream")) {
    if (!body["stream"].is_boolean()) bad("stream", "must be a boolean");
    r.stream = body["stream"];
  }
  if (present(body, "stream_options")) {
    if (!body["stream_options"].is_object()) bad("stream_options", "must be an object");
    r.stream_usage = body["stream_options"].value("include_usage", false);
  }
  // Template switches: top level (what the OpenAI SDK sends for extra_body) or inside extra_body.
  for (const J* src : {&body, body.contains("extra_body") ? &body["extra_body"] : nullptr}) {
    if (src == nullptr || !src->contains("chat_template_kwargs")) continue;
    if (!(*src)["chat_template_kwargs"].is_object()) bad("chat_template_kwargs", "must be an object");
    for (const auto& [k, v] : (*src)["chat_template_kwargs"].items()) r.chat_template_kwargs[k] = v;
  }
  for (const char* unsupported : {"response_format", "logit_bias", "functions", "audio", "modalities", "prediction"})
    if (present(body, unsupported)) bad(unsupported, "is not supported by this proxy");
  return r;
}

}  // namespace areal::proxy
