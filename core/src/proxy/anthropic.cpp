#include "areal/core/proxy/anthropic.hpp"

#include "areal/core/error.hpp"

namespace areal::proxy {
namespace {

using J = nlohmann::ordered_json;

[[noreturn]] void bad(const std::string& field, const std::string& why) {
  throw Error(AREAL_CODE_INVALID_ARGUMENT, field + ": " + why);
}

// Text of a string or of text blocks.
std::string text_of(const J& v, const std::string& field) {
  if (v.is_string()) return v;
  if (!v.is_array()) bad(field, "must be a string or an array of content blocks");
  std::string out;
  for (const auto& b : v) {
    if (!b.is_object() || b.value("type", "") != "text") bad(field, "only text blocks are allowed here");
    out += b.value("text", "");
  }
  return out;
}

}  // namespace

ChatRequest anthropic_to_chat_request(const J& body) {
  if (!body.contains("max_tokens") || !body["max_tokens"].is_number_integer() || body["max_tokens"].get<int64_t>() < 1)
    bad("max_tokens", "is required and must be a positive integer");
  if (!body.contains("messages") || !body["messages"].is_array() || body["messages"].empty())
    bad("messages", "must be a non-empty array");
  J openai = J::object();
  J messages = J::array();
  if (body.contains("system") && !body["system"].is_null()) messages.push_back({{"role", "system"}, {"content", text_of(body["system"], "system")}});
  for (size_t i = 0; i < body["messages"].size(); ++i) {
    const J& m = body["messages"][i];
    const std::string where = "messages." + std::to_string(i);
    if (!m.is_object() || !m.contains("role")) bad(where, "must be an object with a role");
    const std::string role = m["role"];
    if (role != "user" && role != "assistant") bad(where + ".role", "must be user or assistant");
    if (!m.contains("content")) bad(where + ".content", "is required");
    const J& content = m["content"];
    if (content.is_string()) {
      messages.push_back({{"role", role}, {"content", content}});
      continue;
    }
    if (!content.is_array()) bad(where + ".content", "must be a string or an array of content blocks");
    std::string text, thinking;
    J tool_calls = J::array();
    for (size_t k = 0; k < content.size(); ++k) {
      const J& b = content[k];
      const std::string type = b.is_object() ? b.value("type", "") : "";
      const std::string bw = where + ".content." + std::to_string(k);
      if (type == "text") {
        text += b.value("text", "");
      } else if (type == "thinking" && role == "assistant") {
        thinking += b.value("thinking", "");
      } else if (type == "redacted_thinking" && role == "assistant") {
        // Encrypted elsewhere; nothing to render.
      } else if (type == "tool_use" && role == "assistant") {
        if (!b.contains("id") || !b.contains("name")) bad(bw, "tool_use needs id and name");
        tool_calls.push_back({{"id", b["id"]}, {"type", "function"}, {"function", {{"name", b["name"]}, {"arguments", b.value("input", J::object()).dump()}}}});
      } else if (type == "tool_result" && role == "user") {
        if (!b.contains("tool_use_id")) bad(bw, "tool_result needs tool_use_id");
        const std::string result = b.contains("content") ? text_of(b["content"], bw + ".content") : "";
        messages.push_back({{"role", "tool"}, {"tool_call_id", b["tool_use_id"]}, {"content", result}});
      } else {
        bad(bw, "block type '" + type + "' is not supported in a " + role + " message (text, thinking, tool_use, tool_result)");
      }
    }
    if (role == "assistant") {
      J a = {{"role", "assistant"}, {"content", text}};
      if (!thinking.empty()) a["reasoning_content"] = thinking;
      if (!tool_calls.empty()) a["tool_calls"] = tool_calls;
      messages.push_back(a);
    } else if (!text.empty()) {
      messages.push_back({{"role", "user"}, {"content", text}});
    }
  }
  openai["messages"] = messages;
  openai["max_tokens"] = body["max_tokens"];
  for (const char* k : {"temperature", "top_p", "top_k", "stream", "model"})
    if (body.contains(k)) openai[k] = body[k];
  if (body.contains("stop_sequences")) openai["stop"] = body["stop_sequences"];
  if (body.contains("tools") && !body["tools"].is_null()) {
    if (!body["tools"].is_array()) bad("tools", "must be an array");
    J tools = J::array();
    for (const auto& t : body["tools"]) {
      if (!t.is_object() || !t.contains("name")) bad("tools", "each tool needs a name");
      if (t.contains("type") && t["type"] != "custom") bad("tools", "server tools (" + t["type"].dump() + ") are not supported");
      tools.push_back({{"type", "function"},
                       {"function", {{"name", t["name"]}, {"description", t.value("description", "")}, {"parameters", t.value("input_schema", J::object())}}}});
    }
    openai["tools"] = tools;
  }
  if (body.contains("tool_choice") && !body["tool_choice"].is_null()) {
    const std::string type = body["tool_choice"].value("type", "auto");
    if (type == "none") openai["tool_choice"] = "none";
    else if (type != "auto") bad("tool_choice", "'" + type + "' forces a tool call, which needs constrained decoding; use auto");
  }
  if (body.contains("thinking") && body["thinking"].is_object()) {
    const std::string type = body["thinking"].value("type", "");
    if (type != "enabled" && type != "disabled") bad("thinking.type", "must be enabled or disabled");
    openai["chat_template_kwargs"] = {{"enable_thinking", type == "enabled"}};
  }
  ChatRequest r;
  try {
    r = parse_chat_request(openai);
  } catch (const Error& e) {
    throw Error(e.code(), std::string("(as an OpenAI request) ") + e.what());
  }
  r.tool_call_id_prefix = "toolu_";
  return r;
}

std::string anthropic_stop_reason(const ChatService::Completed& c, const ChatRequest&) {
  if (!c.parsed.tool_calls.empty() && c.gen.finish_reason == "stop") return "tool_use";
  if (c.gen.finish_reason == "length") return "max_tokens";
  return "end_turn";
}

J anthropic_content(const ChatService::Completed& c) {
  J blocks = J::array();
  if (c.parsed.has_reasoning) blocks.push_back({{"type", "thinking"}, {"thinking", c.parsed.reasoning}, {"signature", ""}});
  if (!c.parsed.content.empty() || c.parsed.tool_calls.empty()) blocks.push_back({{"type", "text"}, {"text", c.parsed.content}});
  for (const auto& t : c.parsed.tool_calls) {
    J input;
    try {
      input = J::parse(t.arguments);
    } catch (const nlohmann::json::exception&) {
      input = J{{"_raw_arguments", t.arguments}};
    }
    blocks.push_back({{"type", "tool_use"}, {"id", t.id}, {"name", t.name}, {"input", input}});
  }
  return blocks;
}

J anthropic_message(const ChatService::Completed& c, const ChatRequest& req, const std::string& model) {
  return {{"id", "msg_" + c.id.substr(c.id.find('-') + 1)},
          {"type", "message"},
          {"role", "assistant"},
          {"model", model},
          {"content", anthropic_content(c)},
          {"stop_reason", anthropic_stop_reason(c, req)},
          {"stop_sequence", nullptr},
          {"usage", {{"input_tokens", c.gen.prompt_ids.size()}, {"output_tokens", c.gen.output_ids.size()}}}};
}

}  // namespace areal::proxy
