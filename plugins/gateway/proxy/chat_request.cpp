#include "plugins/gateway/proxy/chat_request.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <set>
#include <sstream>

#include "core/plugin_host/error.hpp"
#include "plugins/gateway/proxy/attribution_line.hpp"
#include "core/structured_output/json_schema_matcher.hpp"
#include "core/text/json_depth.hpp"
#include "areal/inference.h"

namespace areal::proxy {
namespace {

using J = nlohmann::ordered_json;

constexpr float kSmallestTopP = 1e-9f;

[[noreturn]] void bad(const std::string& param, const std::string& why) {
  throw Error(AREAL_CODE_INVALID_ARGUMENT, "'" + param + "': " + why);
}

// A bound as a person writes it: 0, 2, 1e-09 (std::to_string wrote 0.000000).
std::string short_number(double d) {
  std::ostringstream out;
  out << d;
  return out.str();
}

double number(const J& body, const char* key, double lo, double hi) {
  const J& v = body[key];
  if (!v.is_number()) bad(key, "must be a number");
  const double d = v.get<double>();
  if (!std::isfinite(d) || d < lo || d > hi) bad(key, "must be between " + short_number(lo) + " and " + short_number(hi));
  return d;
}

int64_t integer(const J& body, const char* key, int64_t lo, int64_t hi) {
  const J& v = body[key];
  if (!v.is_number_integer()) bad(key, "must be an integer");
  const int64_t i = v.get<int64_t>();
  if (i < lo || i > hi) bad(key, "must be between " + std::to_string(lo) + " and " + std::to_string(hi));
  return i;
}


// The part types besides the text ones that clients send: OpenAI's image,
// audio and file parts and vLLM's extensions (its multimodal parts, and
// thinking). Dropped and noted; a type in neither list is not in any
// schema (a 400).
const std::set<std::string>& media_part_types() {
  static const std::set<std::string> types = {"image_url", "input_audio", "file", "audio_url", "video_url", "image_embeds",
                                              "image_pil", "input_image", "thinking"};
  return types;
}

// Responses-style text parts in a Chat message (clients and bridges that
// reuse Responses content send them): text, as vLLM reads them.
bool responses_text_part(const std::string& type) { return type == "input_text" || type == "output_text"; }

// Text of a content value: a string, or parts of which text and refusal
// parts count; image, audio and file parts are dropped (a text model cannot
// see them) and noted.
std::string content_text(const J& content, const std::string& where, FieldNotes& notes, bool system) {
  // A system text's Claude Code attribution line is dropped (attribution_line.hpp).
  auto text_of = [&](const std::string& t) -> std::optional<std::string> {
    const auto rest = system ? without_attribution_line(t) : std::nullopt;
    if (!rest) return t;
    notes.ignore("messages[].content.x-anthropic-billing-header");
    return rest->empty() && !content.is_string() ? std::nullopt : rest;
  };
  if (content.is_string()) return *text_of(content.get<std::string>());
  std::string text;
  for (size_t k = 0; k < content.size(); ++k) {
    const J& part = content[k];
    const std::string pw = where + "[" + std::to_string(k) + "]";
    if (!part.is_object() || !part.contains("type") || !part["type"].is_string()) bad(pw, "each content part must be an object with a type");
    const std::string type = part["type"];
    if (type == "text" || type == "refusal" || responses_text_part(type)) {
      const std::string key = type == "refusal" ? "refusal" : "text";
      const J& t = part.contains(key) ? part[key] : J();
      if (!t.is_string()) bad(pw, "a " + type + " part needs a string '" + key + "'");
      // An echoed output_text carries its annotations and logprobs: nothing to render.
      note_nested_fields(part, {"messages[].content[]", {"type", key.c_str()}, {"annotations", "logprobs", "cache_control"}}, notes);
      const auto kept = text_of(t.get<std::string>());
      if (!kept) continue;
      if (!text.empty()) text += "\n";  // parts are joined with newlines, as vLLM does
      text += *kept;
    } else if (media_part_types().count(type)) {
      notes.ignore("messages[].content[]." + type);
    } else {
      bad(pw + ".type", "unknown content part type '" + type + "' (text, refusal, input_text, output_text, image_url, input_audio or file)");
    }
  }
  return text;
}

// Validates and normalises messages in place: content parts become text,
// the deprecated `function` role and `function_call` become tool forms.
void normalize_messages(J& messages, FieldNotes& notes) {
  if (!messages.is_array() || messages.empty()) bad("messages", "must be a non-empty array");
  for (size_t i = 0; i < messages.size(); ++i) {
    J& m = messages[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) bad(where, "must be an object");
    if (!m.contains("role") || !m["role"].is_string()) bad(where + ".role", "is required");
    std::string role = m["role"];
    if (role != "system" && role != "developer" && role != "user" && role != "assistant" && role != "tool" && role != "function")
      bad(where + ".role", "must be system, developer, user, assistant or tool, got '" + role + "'");
    // developer is OpenAI's newer name for system; chat templates know only
    // system (Qwen3's drops a role it does not know, text and all).
    if (role == "developer") m["role"] = role = "system";
    if (role == "function") {  // deprecated: a function result is a tool message named by the function
      m["role"] = role = "tool";
      if (!m.contains("tool_call_id")) m["tool_call_id"] = m.value("name", std::string());
    }
    if (role == "assistant" && m.contains("function_call") && m["function_call"].is_object() && !m.contains("tool_calls")) {
      const J& fc = m["function_call"];
      m["tool_calls"] = J::array({{{"id", "call_" + fc.value("name", std::string())}, {"type", "function"},
                                   {"function", {{"name", fc.value("name", std::string())}, {"arguments", fc.value("arguments", std::string("{}"))}}}}});
      m.erase("function_call");
    }
    const bool has_content = m.contains("content") && !m["content"].is_null();
    if (has_content && !m["content"].is_string() && !m["content"].is_array())
      bad(where + ".content", "must be a string or an array of content parts");
    // An assistant turn may come back with content null or without the key
    // (OpenAI sends null beside tool_calls; frameworks echo it): it renders
    // as empty text, as vLLM renders it. Templates test content as a string.
    if (!has_content && role == "assistant") m["content"] = "";
    else if (!has_content) bad(where + ".content", "is required");
    if (role == "tool" && !m.contains("tool_call_id")) bad(where + ".tool_call_id", "is required for tool messages");
    if (has_content && (m["content"].is_array() || role == "system")) m["content"] = content_text(m["content"], where + ".content", notes, role == "system");
  }
}

void parse_tool_choice(const J& tc, ChatRequest& r) {
  auto named = [&](const J& name) {
    if (!name.is_string() || name.get<std::string>().empty()) bad("tool_choice", "a named choice needs a function name");
    r.tool_choice = "function";
    r.forced_tool = name;
  };
  if (tc.is_string()) {
    r.tool_choice = tc;
    if (r.tool_choice != "none" && r.tool_choice != "auto" && r.tool_choice != "required")
      bad("tool_choice", "must be none, auto, required or a named function");
  } else if (tc.is_object() && tc.contains("function") && tc["function"].is_object() && tc["function"].contains("name")) {
    named(tc["function"]["name"]);  // {"type": "function", "function": {"name": ...}}
  } else if (tc.is_object() && tc.value("type", "") == "function" && tc.contains("name")) {
    named(tc["name"]);  // the Responses form
  } else if (tc.is_object() && tc.value("type", "") == "custom" && tc.contains("custom") && tc["custom"].is_object()) {
    named(tc["custom"].value("name", J()));
  } else if (tc.is_object() && tc.value("type", "") == "allowed_tools" && tc.contains("allowed_tools")) {
    // The tool list stays whole (the template renders it); the mode applies.
    const std::string mode = tc["allowed_tools"].value("mode", std::string("auto"));
    if (mode != "auto" && mode != "required") bad("tool_choice.allowed_tools.mode", "must be auto or required");
    r.tool_choice = mode;
    r.fields.ignore("tool_choice.allowed_tools.tools");
  } else {
    bad("tool_choice", "must be none, auto, required or {\"type\": \"function\", \"function\": {\"name\": ...}}");
  }
  if (r.tool_choice == "required" && r.tools.is_null()) {
    // OpenAI refuses required without tools; with tools we do not render
    // (custom ones) there is nothing to force: auto, noted.
    if (!r.any_tools) bad("tool_choice", "is 'required' but the request has no 'tools'");
    r.fields.ignore("tool_choice=required (no function tools)");
    r.tool_choice = "auto";
  }
  if (r.tool_choice == "function") {
    bool found = false;
    if (r.tools.is_array())
      for (const auto& t : r.tools) found = found || t["function"]["name"] == r.forced_tool;
    if (!found && r.dropped_tools.count(r.forced_tool)) {  // a hosted/custom tool we do not render: nothing to force
      r.fields.ignore("tool_choice.name");
      r.tool_choice = "auto";
      r.forced_tool.clear();
    } else if (!found) {
      bad("tool_choice", "names function '" + r.forced_tool + "', which is not in 'tools'");
    }
  }
}

}  // namespace

bool thinking_for_effort(const std::string& effort) { return effort != "none" && effort != "minimal"; }

void set_response_format(ChatRequest& r, const J& format, const std::string& param) {
  if (format.is_null()) return;
  if (!format.is_object() || !format.contains("type") || !format["type"].is_string()) bad(param, "must be an object with a 'type'");
  const std::string type = format["type"];
  // OpenAI's three types, and the SGLang/vLLM extension structural_tag
  // (accepted, not enforced); anything else is malformed.
  if (type != "text" && type != "json_object" && type != "json_schema" && type != "structural_tag")
    bad(param + ".type", "must be text, json_object or json_schema, got '" + type + "'");
  if (type == "text") return;
  // With tools on offer the reply may be a tool call, which no JSON mask
  // allows: the format is then not enforced (agent SDKs send both on every turn).
  if (r.tools_enabled()) {
    r.fields.ignore(param + " (tools offered)");
    return;
  }
  if (type == "json_object") {
    r.structured_output = AREAL_STRUCTURED_JSON_OBJECT;
  } else if (type == "json_schema") {
    // Chat nests the schema under json_schema; Responses and Anthropic put it beside type.
    const J* holder = present(format, "json_schema") ? &format["json_schema"] : &format;
    if (!holder->is_object()) bad(param + ".json_schema", "must be an object");
    const J schema = present(*holder, "schema") ? (*holder)["schema"] : J::object();  // no schema: any JSON
    if (!schema.is_object() && !schema.is_boolean()) bad(param + ".schema", "must be a JSON Schema object");
    r.structured_output = AREAL_STRUCTURED_JSON_SCHEMA;
    r.json_schema = schema.dump();
    // Compiled here as well, whatever the backend: a schema no engine can use
    // is the client's mistake (400), and its cost is bounded (depth, nodes)
    // before any engine sees it.
    try {
      structured_output::Schema::compile(text::parse_json_bounded(r.json_schema));
    } catch (const Error& e) {
      bad(param + ".schema", e.what());
    }
    if (present(*holder, "strict")) r.fields.ignore(param + ".strict");  // always enforced
  } else {
    r.fields.ignore(param + ".type=" + type);  // structural_tag: a grammar we do not implement, unconstrained
    return;
  }
  r.chat_template_kwargs["enable_thinking"] = false;
}

ChatRequest rethrow_type_errors_as_invalid(const std::function<ChatRequest()>& parse) {
  try {
    return parse();
  } catch (const nlohmann::json::exception& e) {
    throw Error(AREAL_CODE_INVALID_ARGUMENT, std::string("malformed request: a field has the wrong type (") + e.what() + ")");
  }
}

ChatRequest parse_chat_request(const J& body) {
  return rethrow_type_errors_as_invalid([&] { return parse_chat_request_checked(body); });
}

ChatRequest parse_chat_request_checked(const J& body) {
  ChatRequest r;
  note_fields(body, chat_completions_fields(), r.fields);
  if (!body.contains("messages")) bad("messages", "is required");
  r.messages = body["messages"];
  normalize_messages(r.messages, r.fields);
  if (present(body, "model")) {
    if (!body["model"].is_string()) bad("model", "must be a string");
    r.model = body["model"];
  }
  if (present(body, "tools")) {
    if (!body["tools"].is_array()) bad("tools", "must be an array");
    J tools = J::array();
    size_t skipped = 0;  // tools not rendered so far (for the index in a message)
    for (const auto& t : body["tools"]) {
      if (!t.is_object()) bad("tools", "each tool must be an object");
      const std::string type = t.contains("type") && t["type"].is_string() ? t["type"].get<std::string>() : "function";
      if (type != "function") {  // custom (free-form) tools have no JSON-schema rendering in chat templates
        ++skipped;
        r.fields.ignore("tools[].type=" + type);
        if (t.contains(type) && t[type].is_object() && t[type].contains("name") && t[type]["name"].is_string()) r.dropped_tools.insert(t[type]["name"].get<std::string>());
        continue;
      }
      if (!t.contains("function") || !t["function"].is_object() || !t["function"].contains("name") || !t["function"]["name"].is_string())
        bad("tools", "each function tool must be {\"type\": \"function\", \"function\": {\"name\": ...}}");
      const J& fn = t["function"];
      if (present(fn, "parameters") && !fn["parameters"].is_object())
        bad("tools[" + std::to_string(tools.size() + skipped) + "].function.parameters", "must be an object (a JSON Schema)");
      note_nested_fields(t, {"tools[]", {"type", "function"}, {"cache_control"}}, r.fields);
      note_nested_fields(fn, {"tools[].function", {"name", "description", "parameters"}, {"strict"}}, r.fields);
      tools.push_back(t);
    }
    if (!tools.empty()) r.tools = tools;
    r.any_tools = !body["tools"].empty();
  }
  if (present(body, "tool_choice")) parse_tool_choice(body["tool_choice"], r);
  if (present(body, "n")) r.n = static_cast<int32_t>(integer(body, "n", 1, 128));
  if (present(body, "temperature")) r.temperature = static_cast<float>(number(body, "temperature", 0, 2));
  // top_p 0 (OpenAI's range starts there) keeps the most likely token only:
  // the smallest positive nucleus, which every backend accepts.
  if (present(body, "top_p")) r.top_p = std::max(static_cast<float>(number(body, "top_p", 0, 1)), kSmallestTopP);
  if (present(body, "top_k")) r.top_k = static_cast<int32_t>(integer(body, "top_k", -1, 1 << 20));
  if (r.top_k < 0) r.top_k = 0;
  // Both given (the deprecated name beside the new one): the new one counts, as at vLLM.
  if (present(body, "max_completion_tokens")) {
    if (present(body, "max_tokens")) r.fields.ignore("max_tokens (max_completion_tokens given)");
    r.max_tokens = integer(body, "max_completion_tokens", 1, int64_t{1} << 40);
  } else if (present(body, "max_tokens")) {
    r.max_tokens = integer(body, "max_tokens", 1, int64_t{1} << 40);
  }
  if (present(body, "max_total_tokens")) r.max_total_tokens = integer(body, "max_total_tokens", 1, int64_t{1} << 40);
  if (present(body, "stop")) {
    const J& s = body["stop"];
    if (s.is_string()) {
      if (!s.get<std::string>().empty()) r.stop.push_back(s);
    } else if (s.is_array() && s.size() <= 16) {
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
  if (present(body, "top_logprobs")) integer(body, "top_logprobs", 0, 20);  // validated; alternatives are not produced
  // OpenAI's meaning ("keep the output at OpenAI"; off by default there): nothing the gateway
  // keeps. Clients send `store: false` routinely (pi-coding-agent), and a session's calls are
  // its training data: they are recorded either way (AReaL's proxy would drop them silently).
  if (present(body, "store") && !body["store"].is_boolean()) bad("store", "must be a boolean");
  if (present(body, "stream")) {
    if (!body["stream"].is_boolean()) bad("stream", "must be a boolean");
    r.stream = body["stream"];
  }
  if (present(body, "stream_options")) {
    if (!body["stream_options"].is_object()) bad("stream_options", "must be an object");
    const J& usage = body["stream_options"].contains("include_usage") ? body["stream_options"]["include_usage"] : J(false);
    if (!usage.is_null() && !usage.is_boolean()) bad("stream_options.include_usage", "must be a boolean");
    r.stream_usage = usage.is_boolean() && usage.get<bool>();
  }
  if (present(body, "frequency_penalty")) r.frequency_penalty = static_cast<float>(number(body, "frequency_penalty", -2, 2));
  if (present(body, "presence_penalty")) r.presence_penalty = static_cast<float>(number(body, "presence_penalty", -2, 2));
  if (present(body, "logit_bias")) {
    if (!body["logit_bias"].is_object()) bad("logit_bias", "must be an object mapping token ids to biases");
    for (const auto& [key, bias] : body["logit_bias"].items()) {
      char* end = nullptr;
      const long id = std::strtol(key.c_str(), &end, 10);
      if (key.empty() || *end != '\0' || id < 0 || id > INT32_MAX) bad("logit_bias", "keys must be token ids, got '" + key + "'");
      if (!bias.is_number() || bias.get<double>() < -100 || bias.get<double>() > 100) bad("logit_bias", "values must be numbers in [-100, 100]");
      r.logit_bias.emplace_back(static_cast<int32_t>(id), bias.get<float>());
    }
  }
  if (present(body, "reasoning_effort")) {
    if (!body["reasoning_effort"].is_string()) bad("reasoning_effort", "must be a string");
    r.chat_template_kwargs["enable_thinking"] = thinking_for_effort(body["reasoning_effort"]);
  }
  // Template switches: top level (what the OpenAI SDK sends for extra_body) or inside extra_body.
  if (present(body, "extra_body") && !body["extra_body"].is_object()) bad("extra_body", "must be an object");
  for (const J* src : {&body, present(body, "extra_body") ? &body["extra_body"] : nullptr}) {
    if (src == nullptr || !src->contains("chat_template_kwargs") || (*src)["chat_template_kwargs"].is_null()) continue;
    if (!(*src)["chat_template_kwargs"].is_object()) bad("chat_template_kwargs", "must be an object");
    for (const auto& [k, v] : (*src)["chat_template_kwargs"].items()) r.chat_template_kwargs[k] = v;
  }
  if (present(body, "response_format")) set_response_format(r, body["response_format"], "response_format");
  return r;
}

}  // namespace areal::proxy
