#include "plugins/gateway/proxy/anthropic.hpp"
#include "core/text/json_depth.hpp"

#include <optional>
#include <set>
#include <cstdint>
#include <string>

#include "core/plugin_host/error.hpp"
#include "plugins/gateway/proxy/attribution_line.hpp"

namespace areal::proxy {
namespace {

using J = nlohmann::ordered_json;

[[noreturn]] void bad(const std::string& field, const std::string& why) {
  throw Error(AREAL_CODE_INVALID_ARGUMENT, field + ": " + why);
}



// Block types a text model cannot render: dropped and noted. Server-tool
// blocks follow Anthropic's naming (server_tool_use, web_search_tool_result,
// mcp_tool_use, ...), so new server tools are known by their names' form.
bool droppable_block(const std::string& type) {
  static const std::set<std::string> kinds = {"image",           "document",     "search_result", "redacted_thinking",
                                              "container_upload", "tool_reference", "compaction"};
  auto ends_with = [&](const std::string& tail) { return type.size() > tail.size() && type.compare(type.size() - tail.size(), tail.size(), tail) == 0; };
  return kinds.count(type) || ends_with("_tool_use") || ends_with("_tool_result") || type.rfind("mcp_", 0) == 0;
}

// A block type that is in no schema: the 400 names the block.
[[noreturn]] void unknown_block(const std::string& where, const std::string& type) {
  bad(where + ".type", "unknown content block type '" + type + "' (text, image, document, thinking, tool_use, tool_result, ...)");
}

// The keys of a text block (`path` "system[]", "messages[].content[]", ...).
void note_text_block(const J& b, const std::string& path, FieldNotes& notes) {
  note_nested_fields(b, {path.c_str(), {"type", "text"}, {"cache_control", "citations"}}, notes);
}

// Text of a string or of content blocks: text blocks count; other blocks
// (images, documents, search results) are dropped and noted, and so is
// Claude Code's attribution line in a system text block.
std::string text_of(const J& v, const std::string& field, const std::string& note_as, FieldNotes& notes, bool system = false) {
  if (v.is_string()) {
    const auto rest = system ? without_attribution_line(v.get<std::string>()) : std::nullopt;
    if (rest) notes.ignore(note_as + ".x-anthropic-billing-header");
    return rest ? *rest : v.get<std::string>();
  }
  if (!v.is_array()) bad(field, "must be a string or an array of content blocks");
  std::string out;
  for (size_t k = 0; k < v.size(); ++k) {
    const J& b = v[k];
    const std::string bw = field + "." + std::to_string(k);
    if (!b.is_object() || !b.contains("type") || !b["type"].is_string()) bad(bw, "each content block must be an object with a type");
    const std::string type = b["type"];
    if (type == "text") {
      if (!b.contains("text") || !b["text"].is_string()) bad(bw, "a text block needs a string 'text'");
      note_text_block(b, note_as, notes);
      std::string text = b["text"];
      if (const auto rest = system ? without_attribution_line(text) : std::nullopt) {  // attribution_line.hpp
        notes.ignore(note_as + ".x-anthropic-billing-header");
        if (rest->empty()) continue;
        text = *rest;
      }
      if (!out.empty()) out += "\n";  // blocks are joined with newlines, as vLLM joins text parts
      out += text;
    } else if (droppable_block(type) || type == "thinking" || type == "tool_use" || type == "tool_result") {
      notes.ignore(note_as + "." + type);  // no text a system prompt or tool result can show
    } else {
      unknown_block(bw, type);
    }
  }
  return out;
}

// One Anthropic message -> OpenAI messages (a user message with tool
// results becomes tool messages, then the user's text).
void convert_message(const J& m, size_t i, J& out, FieldNotes& notes) {
  const std::string where = "messages." + std::to_string(i);
  if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) bad(where, "must be an object with a role");
  const std::string role = m["role"];
  if (role != "user" && role != "assistant" && role != "system") bad(where + ".role", "must be user, assistant or system");
  if (!m.contains("content") || m["content"].is_null()) bad(where + ".content", "is required");
  const J& content = m["content"];
  if (role == "system") {  // Claude Code puts system reminders among the messages
    const std::string text = text_of(content, where + ".content", "messages[].content[]", notes, true);
    if (!text.empty() || content.is_string()) out.push_back({{"role", "system"}, {"content", text}});  // not an attribution block alone
    return;
  }
  if (content.is_string()) {
    out.push_back({{"role", role}, {"content", content}});
    return;
  }
  if (!content.is_array()) bad(where + ".content", "must be a string or an array of content blocks");
  std::string text, thinking;
  J tool_calls = J::array();
  for (size_t k = 0; k < content.size(); ++k) {
    const J& b = content[k];
    const std::string bw = where + ".content." + std::to_string(k);
    if (!b.is_object() || !b.contains("type") || !b["type"].is_string()) bad(bw, "must be an object with a type");
    const std::string type = b["type"];
    const char* path = "messages[].content[]";
    if (type == "text") {
      if (!b.contains("text") || !b["text"].is_string()) bad(bw, "a text block needs a string 'text'");
      note_text_block(b, path, notes);
      if (!text.empty()) text += "\n";
      text += b["text"].get<std::string>();
    } else if (type == "thinking" && role == "assistant") {
      // The signature proves the thinking came from Anthropic; nothing to check here.
      note_nested_fields(b, {path, {"type", "thinking"}, {"signature", "cache_control"}}, notes);
      thinking += b.value("thinking", "");
    } else if (type == "tool_use" && role == "assistant") {
      if (!b.contains("id") || !b.contains("name")) bad(bw, "tool_use needs id and name");
      note_nested_fields(b, {path, {"type", "id", "name", "input"}, {"cache_control"}}, notes);
      tool_calls.push_back({{"id", b["id"]}, {"type", "function"}, {"function", {{"name", b["name"]}, {"arguments", b.value("input", J::object()).dump()}}}});
    } else if (type == "tool_result" && role == "user") {
      if (!b.contains("tool_use_id")) bad(bw, "tool_result needs tool_use_id");
      note_nested_fields(b, {path, {"type", "tool_use_id", "content"}, {"is_error", "cache_control"}}, notes);
      const std::string result = present(b, "content") ? text_of(b["content"], bw + ".content", "messages[].content[].tool_result.content[]", notes) : "";
      out.push_back({{"role", "tool"}, {"tool_call_id", b["tool_use_id"]}, {"content", result}});
    } else if (droppable_block(type) || type == "thinking" || type == "tool_use" || type == "tool_result") {
      // redacted_thinking (encrypted elsewhere), images, documents, server-tool blocks, and
      // blocks in a role that cannot hold them: nothing a text model can render.
      notes.ignore("messages[].content[]." + type);
    } else {
      unknown_block(bw, type);
    }
  }
  if (role == "assistant") {
    J a = {{"role", "assistant"}, {"content", text}};
    if (!thinking.empty()) a["reasoning_content"] = thinking;
    if (!tool_calls.empty()) a["tool_calls"] = tool_calls;
    out.push_back(a);
  } else if (!text.empty()) {
    out.push_back({{"role", "user"}, {"content", text}});
  }
}

// thinking / output_config.effort -> the template's thinking switch, or
// nothing (the template's default).
std::optional<bool> thinking_switch(const J& body) {
  std::optional<std::string> effort;
  if (present(body, "output_config")) {
    if (!body["output_config"].is_object()) bad("output_config", "must be an object");
    if (present(body["output_config"], "effort")) {
      if (!body["output_config"]["effort"].is_string()) bad("output_config.effort", "must be a string");
      effort = body["output_config"]["effort"].get<std::string>();
    }
  }
  if (!present(body, "thinking")) return std::nullopt;
  if (!body["thinking"].is_object() || !body["thinking"].contains("type") || !body["thinking"]["type"].is_string())
    bad("thinking", "must be an object with a type");
  const std::string type = body["thinking"]["type"];
  if (type == "enabled") return true;
  if (type == "disabled") return false;
  if (type == "adaptive") return effort ? std::optional<bool>(*effort != "low" && thinking_for_effort(*effort)) : std::nullopt;
  bad("thinking.type", "must be enabled, disabled or adaptive");
}

}  // namespace

ChatRequest anthropic_to_chat_request_checked(const J& body);

ChatRequest anthropic_to_chat_request(const J& body) {
  return rethrow_type_errors_as_invalid([&] { return anthropic_to_chat_request_checked(body); });
}

ChatRequest anthropic_to_chat_request_checked(const J& body) {
  FieldNotes notes;
  note_fields(body, anthropic_messages_fields(), notes);
  if (!body.contains("max_tokens") || !body["max_tokens"].is_number_integer() || body["max_tokens"].get<int64_t>() < 1)
    bad("max_tokens", "is required and must be a positive integer");
  if (!body.contains("messages") || !body["messages"].is_array() || body["messages"].empty())
    bad("messages", "must be a non-empty array");
  J messages = J::array();
  if (present(body, "system")) {
    const std::string text = text_of(body["system"], "system", "system[]", notes, true);
    if (!text.empty() || body["system"].is_string()) messages.push_back({{"role", "system"}, {"content", text}});  // not an attribution block alone
  }
  for (size_t i = 0; i < body["messages"].size(); ++i) convert_message(body["messages"][i], i, messages, notes);
  J openai = J::object();
  openai["messages"] = messages;
  openai["max_tokens"] = body["max_tokens"];
  for (const char* k : {"temperature", "top_p", "top_k", "stream", "model"})
    if (present(body, k)) openai[k] = body[k];
  if (present(body, "stop_sequences")) openai["stop"] = body["stop_sequences"];
  std::set<std::string> dropped;  // server tools: a tool_choice naming one forces nothing
  bool rendered = false;          // a client tool is rendered
  if (present(body, "tools")) {
    if (!body["tools"].is_array()) bad("tools", "must be an array");
    J tools = J::array();
    for (size_t i = 0; i < body["tools"].size(); ++i) {
      const J& t = body["tools"][i];
      if (!t.is_object()) bad("tools", "each tool must be an object");
      const std::string type = t.contains("type") && t["type"].is_string() ? t["type"].get<std::string>() : "custom";
      if (type != "custom") {  // server tools (web search, code execution, ...) run at Anthropic
        notes.ignore("tools[].type=" + type);
        dropped.insert(opt_string(t, "name"));
        continue;
      }
      if (!t.contains("name") || !t["name"].is_string()) bad("tools", "each tool needs a name");
      if (present(t, "input_schema") && !t["input_schema"].is_object()) bad("tools." + std::to_string(i) + ".input_schema", "must be an object (a JSON Schema)");
      note_nested_fields(t, {"tools[]", {"type", "name", "description", "input_schema"}, {"cache_control", "defer_loading", "strict", "input_examples"}}, notes);
      rendered = true;
      tools.push_back({{"type", "function"},
                       {"function", {{"name", t["name"]}, {"description", opt_string(t, "description")},
                                     {"parameters", present(t, "input_schema") ? t["input_schema"] : J::object()}}}});
    }
    if (!tools.empty()) openai["tools"] = tools;
  }
  if (present(body, "tool_choice")) {
    const J& tc = body["tool_choice"];
    if (!tc.is_object() || !tc.contains("type") || !tc["type"].is_string()) bad("tool_choice", "must be an object with a type");
    const std::string type = tc["type"];
    const bool any_tools = present(body, "tools") && !body["tools"].empty();
    if ((type == "any" || type == "tool") && !any_tools) bad("tool_choice.type", "is '" + type + "' but the request has no 'tools'");
    if (type == "auto" || type == "none") openai["tool_choice"] = type;
    else if (type == "any" && !rendered) notes.ignore("tool_choice.type=any (no client tools)");  // only server tools: nothing to force
    else if (type == "any") openai["tool_choice"] = "required";
    else if (type == "tool" && dropped.count(opt_string(tc, "name"))) notes.ignore("tool_choice.name");
    else if (type == "tool") openai["tool_choice"] = {{"type", "function"}, {"function", {{"name", tc.value("name", J())}}}};
    else bad("tool_choice.type", "must be auto, any, tool or none");
    if (tc.contains("disable_parallel_tool_use")) notes.ignore("tool_choice.disable_parallel_tool_use");
  }
  if (const auto on = thinking_switch(body)) openai["chat_template_kwargs"] = {{"enable_thinking", *on}};
  ChatRequest r;
  try {
    r = parse_chat_request_checked(openai);
  } catch (const Error& e) {
    throw Error(e.code(), std::string("(as an OpenAI request) ") + e.what());
  }
  // Structured output: output_config.format (GA) or the older beta's top-level output_format.
  if (present(body, "output_config") && present(body["output_config"], "format")) set_response_format(r, body["output_config"]["format"], "output_config.format");
  else if (present(body, "output_format")) set_response_format(r, body["output_format"], "output_format");
  for (const auto& f : notes.ignored) r.fields.ignore(f);
  r.fields.unknown = notes.unknown;
  r.tool_call_id_prefix = "toolu_";
  return r;
}

std::string anthropic_stop_reason(const ChatService::Completed& c, const ChatRequest&) {
  if (!c.parsed.tool_calls.empty() && c.gen.finish_reason == "stop") return "tool_use";
  if (c.gen.finish_reason == "length") return "max_tokens";
  if (!c.gen.stop_string.empty()) return "stop_sequence";
  return "end_turn";
}

J anthropic_stop_sequence(const ChatService::Completed& c) {
  return anthropic_stop_reason(c, ChatRequest{}) == "stop_sequence" ? J(c.gen.stop_string) : J(nullptr);
}

J anthropic_content(const ChatService::Completed& c) {
  J blocks = J::array();
  // An empty think block is no block, as the stream (which opens one on the first thinking text) has it.
  if (c.parsed.has_reasoning && !c.parsed.reasoning.empty()) blocks.push_back({{"type", "thinking"}, {"thinking", c.parsed.reasoning}, {"signature", ""}});
  if (!c.parsed.content.empty() || c.parsed.tool_calls.empty()) blocks.push_back({{"type", "text"}, {"text", c.parsed.content}});
  for (const auto& t : c.parsed.tool_calls) {
    J input = areal::text::parse_json_bounded_or_discarded<J>(t.arguments);
    if (input.is_discarded()) input = J{{"_raw_arguments", t.arguments}};
    blocks.push_back({{"type", "tool_use"}, {"id", t.id}, {"name", t.name}, {"input", input}});
  }
  return blocks;
}

J anthropic_message(const ChatService::Completed& c, const ChatRequest& req, const std::string& model) {
  return {{"id", c.id},  // the recorded call id: set_reward takes it as interaction_id
          {"type", "message"},
          {"role", "assistant"},
          {"model", model},
          {"content", anthropic_content(c)},
          {"stop_reason", anthropic_stop_reason(c, req)},
          {"stop_sequence", anthropic_stop_sequence(c)},
          {"usage", {{"input_tokens", c.gen.prompt_ids.size()}, {"output_tokens", c.gen.output_ids.size()}}}};
}

}  // namespace areal::proxy
