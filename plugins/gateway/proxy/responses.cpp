#include "plugins/gateway/proxy/responses.hpp"

#include <set>
#include <cstdint>
#include <string>

#include "core/plugin_host/error.hpp"

namespace areal::proxy {
namespace {

using J = nlohmann::ordered_json;

[[noreturn]] void bad(const std::string& field, const std::string& why) {
  throw Error(AREAL_CODE_INVALID_ARGUMENT, "'" + field + "': " + why);
}



// Responses' tool_choice forms -> the chat form. Hosted-tool choices
// (web_search_preview, file_search, mcp, ...) and choices naming a tool
// that is not rendered force nothing: auto, noted.
J chat_tool_choice(const J& tc, const std::set<std::string>& rendered, FieldNotes& notes) {
  if (tc.is_string()) return tc;
  if (!tc.is_object() || !tc.contains("type") || !tc["type"].is_string()) bad("tool_choice", "must be a string or an object with a type");
  const std::string type = tc["type"];
  if (type == "function" || type == "custom") {
    const std::string name = opt_string(tc, "name");
    if (name.empty()) bad("tool_choice.name", "is required");
    if (rendered.count(name)) return {{"type", "function"}, {"function", {{"name", name}}}};
    if (type == "function") bad("tool_choice", "names function '" + name + "', which is not in 'tools'");
  } else if (type == "allowed_tools") {
    const std::string mode = opt_string(tc, "mode").empty() ? "auto" : opt_string(tc, "mode");
    if (mode != "auto" && mode != "required") bad("tool_choice.mode", "must be auto or required");
    notes.ignore("tool_choice.tools");
    return mode;
  }
  notes.ignore("tool_choice.type=" + type);
  return "auto";
}

// Text of a content value: text parts count; image, file and audio parts
// are dropped (a text model cannot see them) and noted; a part type the
// schema does not have is a 400.
std::string parts_text(const J& content, const std::string& where, FieldNotes& notes) {
  if (content.is_string()) return content;
  if (!content.is_array()) bad(where, "must be a string or an array of content parts");
  std::string out;
  for (size_t k = 0; k < content.size(); ++k) {
    const J& p = content[k];
    const std::string pw = where + "[" + std::to_string(k) + "]";
    if (!p.is_object() || !p.contains("type") || !p["type"].is_string()) bad(pw, "each content part must be an object with a type");
    const std::string type = p["type"];
    if (type == "input_text" || type == "output_text" || type == "text" || type == "reasoning_text" || type == "summary_text") {
      // An echoed output_text carries its annotations and logprobs: nothing to render.
      note_nested_fields(p, {"input[].content[]", {"type", "text"}, {"annotations", "logprobs", "cache_control"}}, notes);
      if (!out.empty()) out += "\n";  // parts are joined with newlines, as vLLM joins them
      out += p.value("text", "");
    } else if (type == "refusal") {
      note_nested_fields(p, {"input[].content[]", {"type", "refusal"}, {"cache_control"}}, notes);
      if (!out.empty()) out += "\n";
      out += p.value("refusal", "");
    } else if (type == "input_image" || type == "input_file" || type == "input_audio") {
      notes.ignore("input[].content[]." + type);
    } else {
      bad(pw + ".type", "unknown content part type '" + type + "' (input_text, output_text, refusal, input_image, input_file or input_audio)");
    }
  }
  return out;
}

// Input items -> chat messages. One assistant turn arrives as consecutive
// items (reasoning, message, function calls); they merge into one
// assistant message.
void convert_input(const J& input, J& messages, FieldNotes& notes) {
  if (input.is_string()) {
    messages.push_back({{"role", "user"}, {"content", input}});
    return;
  }
  if (!input.is_array()) bad("input", "must be a string or an array of items");
  auto assistant = [&]() -> J& {
    if (messages.empty() || messages.back().value("role", "") != "assistant") messages.push_back({{"role", "assistant"}, {"content", ""}});
    return messages.back();
  };
  for (size_t i = 0; i < input.size(); ++i) {
    const J& item = input[i];
    const std::string where = "input[" + std::to_string(i) + "]";
    if (!item.is_object()) bad(where, "must be an object");
    if (item.contains("type") && !item["type"].is_string()) bad(where + ".type", "must be a string");
    const std::string type = item.value("type", item.contains("role") ? "message" : "");
    if (type == "message") {
      if (!item.contains("role") || !item["role"].is_string()) bad(where + ".role", "is required");
      const std::string role = item["role"];
      if (role != "user" && role != "system" && role != "developer" && role != "assistant") bad(where + ".role", "must be user, system, developer or assistant");
      // Content null or absent is no text (an assistant item echoed back after a tool call).
      const bool no_content = !item.contains("content") || item["content"].is_null();
      const std::string text = no_content ? std::string() : parts_text(item["content"], where + ".content", notes);
      if (role == "assistant") {
        J& a = assistant();
        a["content"] = a["content"].get<std::string>() + text;
      } else {
        messages.push_back({{"role", role == "developer" ? "system" : role}, {"content", text}});
      }
    } else if (type == "reasoning") {
      std::string text;
      for (const auto& s : item.value("summary", J::array())) text += s.value("text", "");
      if (text.empty() && item.contains("content") && item["content"].is_array()) text = parts_text(item["content"], where + ".content", notes);
      if (present(item, "encrypted_content")) notes.ignore("input[].reasoning.encrypted_content");
      J& a = assistant();
      a["reasoning_content"] = a.value("reasoning_content", std::string()) + text;
    } else if (type == "function_call") {
      if (!item.contains("call_id") || !item.contains("name")) bad(where, "function_call needs call_id and name");
      J& a = assistant();
      if (!a.contains("tool_calls")) a["tool_calls"] = J::array();
      a["tool_calls"].push_back({{"id", item["call_id"]}, {"type", "function"},
                                 {"function", {{"name", item["name"]}, {"arguments", item.value("arguments", std::string("{}"))}}}});
    } else if (type == "function_call_output") {
      if (!item.contains("call_id")) bad(where, "function_call_output needs call_id");
      const J& out = item.value("output", J(""));
      const std::string text = out.is_string() ? out.get<std::string>() : out.is_array() ? parts_text(out, where + ".output", notes) : out.dump();
      messages.push_back({{"role", "tool"}, {"tool_call_id", item["call_id"]}, {"content", text}});
    } else {
      // Hosted-tool calls (web_search_call, file_search_call, ...), item
      // references and custom tool calls: nothing the template can render.
      notes.ignore("input[].type=" + type);
    }
  }
}

}  // namespace

ChatRequest responses_to_chat_request_checked(const J& body, const J& history);

ChatRequest responses_to_chat_request(const J& body, const J& history) {
  return rethrow_type_errors_as_invalid([&] { return responses_to_chat_request_checked(body, history); });
}

ChatRequest responses_to_chat_request_checked(const J& body, const J& history) {
  FieldNotes notes;
  note_fields(body, responses_fields(), notes);
  if (present(body, "conversation"))
    throw Error(AREAL_CODE_NOT_FOUND, "Conversation " + body["conversation"].dump() +
                                          " not found: this gateway keeps no conversations; send the history in 'input' or use 'previous_response_id'");
  if (present(body, "prompt"))
    throw Error(AREAL_CODE_NOT_FOUND, "Prompt " + body["prompt"].dump() + " not found: stored prompts live at OpenAI; send the text in 'input'");
  if (!body.contains("input")) bad("input", "is required");
  J messages = history.is_array() ? history : J::array();
  if (present(body, "instructions")) {
    if (!body["instructions"].is_string()) bad("instructions", "must be a string");
    // A previous response's instructions are not carried over (OpenAI's rule): `history` has none.
    messages.insert(messages.begin(), J{{"role", "system"}, {"content", body["instructions"]}});
  }
  convert_input(body["input"], messages, notes);
  J openai = {{"messages", messages}};
  if (present(body, "max_output_tokens")) openai["max_tokens"] = body["max_output_tokens"];
  for (const char* k : {"temperature", "top_p", "stream", "model"})
    if (present(body, k)) openai[k] = body[k];
  std::set<std::string> rendered;  // names of the function tools the template shows
  const bool any_tools = present(body, "tools") && body["tools"].is_array() && !body["tools"].empty();
  if (present(body, "tools")) {
    if (!body["tools"].is_array()) bad("tools", "must be an array");
    J tools = J::array();
    for (size_t i = 0; i < body["tools"].size(); ++i) {
      const J& t = body["tools"][i];
      if (!t.is_object()) bad("tools", "each tool must be an object");
      const std::string type = present(t, "type") ? t["type"].get<std::string>() : "function";
      if (type != "function") {  // hosted tools run at OpenAI; namespaces and custom tools have no template form
        notes.ignore("tools[].type=" + type);
        continue;
      }
      if (!t.contains("name") || !t["name"].is_string()) bad("tools", "each function tool needs a name");
      if (present(t, "parameters") && !t["parameters"].is_object()) bad("tools[" + std::to_string(i) + "].parameters", "must be an object (a JSON Schema)");
      note_nested_fields(t, {"tools[]", {"type", "name", "description", "parameters"}, {"strict", "cache_control"}}, notes);
      rendered.insert(t["name"].get<std::string>());
      tools.push_back({{"type", "function"},
                       {"function", {{"name", t["name"]}, {"description", opt_string(t, "description")},
                                     {"parameters", present(t, "parameters") ? t["parameters"] : J::object()}}}});
    }
    if (!tools.empty()) openai["tools"] = tools;
  }
  if (present(body, "tool_choice")) {
    J tc = chat_tool_choice(body["tool_choice"], rendered, notes);
    if (tc == "required" && rendered.empty()) {
      // OpenAI refuses required without tools; with only hosted tools there is nothing we can force.
      if (!any_tools) bad("tool_choice", "is 'required' but the request has no 'tools'");
      notes.ignore("tool_choice=required (no function tools)");
      tc = "auto";
    }
    openai["tool_choice"] = tc;
  }
  if (present(body, "reasoning")) {
    if (!body["reasoning"].is_object()) bad("reasoning", "must be an object");
    if (present(body["reasoning"], "effort")) {
      if (!body["reasoning"]["effort"].is_string()) bad("reasoning.effort", "must be a string");
      openai["chat_template_kwargs"] = {{"enable_thinking", thinking_for_effort(body["reasoning"]["effort"])}};
    }
    if (present(body["reasoning"], "summary")) notes.ignore("reasoning.summary");
  }
  if (present(body, "text")) {
    if (!body["text"].is_object()) bad("text", "must be an object");
    if (present(body["text"], "verbosity")) notes.ignore("text.verbosity");
  }
  if (present(body, "store") && !body["store"].is_boolean()) bad("store", "must be a boolean");
  ChatRequest r;
  try {
    r = parse_chat_request_checked(openai);
  } catch (const Error& e) {
    throw Error(e.code(), std::string("(as a chat request) ") + e.what());
  }
  if (present(body, "text") && present(body["text"], "format")) set_response_format(r, body["text"]["format"], "text.format");
  for (const auto& f : notes.ignored) r.fields.ignore(f);
  r.fields.unknown = notes.unknown;
  return r;
}

std::string response_item_id(const std::string& response_id, const std::string& kind) {
  return kind + "_" + response_id.substr(response_id.find('_') + 1);
}

J responses_output(const ChatService::Completed& c) {
  J items = J::array();
  // An empty think block is no item: a stream announces none for it (it
  // opens an item on the first reasoning text), and the final object must list
  // what the stream did.
  if (c.parsed.has_reasoning && !c.parsed.reasoning.empty())
    items.push_back({{"type", "reasoning"}, {"id", response_item_id(c.id, "rs")}, {"summary", J::array({{{"type", "summary_text"}, {"text", c.parsed.reasoning}}})}});
  if (!c.parsed.content.empty() || c.parsed.tool_calls.empty())
    items.push_back({{"type", "message"}, {"id", response_item_id(c.id, "msg")}, {"status", "completed"}, {"role", "assistant"},
                     {"content", J::array({{{"type", "output_text"}, {"text", c.parsed.content}, {"annotations", J::array()}}})}});
  for (const auto& t : c.parsed.tool_calls)
    items.push_back({{"type", "function_call"}, {"id", "fc_" + (t.id.rfind("call_", 0) == 0 ? t.id.substr(5) : t.id)}, {"call_id", t.id}, {"name", t.name},
                     {"arguments", t.arguments}, {"status", "completed"}});
  return items;
}

size_t reasoning_tokens(const ChatService::Completed& c, const tokenizer::Tokenizer& tok) {
  if (!c.parsed.has_reasoning) return 0;
  const int32_t close = tok.token_to_id("</think>");
  for (size_t i = 0; i < c.gen.output_ids.size(); ++i)
    if (c.gen.output_ids[i] == close) return i + 1;
  return c.gen.output_ids.size();  // cut off while thinking
}

J responses_object(const ChatService::Completed& c, const ChatRequest& req, const J& body, const std::string& model, int64_t created_at) {
  const bool incomplete = c.gen.finish_reason == "length";
  J tools = J::array();
  if (!req.tools.is_null())
    for (const auto& t : req.tools)
      tools.push_back({{"type", "function"}, {"name", t["function"]["name"]}, {"description", t["function"].value("description", "")},
                       {"parameters", t["function"].value("parameters", J::object())}, {"strict", false}});
  return {{"id", c.id},  // the recorded call id: set_reward takes it as interaction_id
          {"object", "response"},
          {"created_at", created_at},
          {"status", incomplete ? "incomplete" : "completed"},
          {"error", nullptr},
          {"incomplete_details", incomplete ? J{{"reason", "max_output_tokens"}} : J(nullptr)},
          {"instructions", body.value("instructions", J(nullptr))},
          {"max_output_tokens", body.value("max_output_tokens", J(nullptr))},
          {"model", model},
          {"output", responses_output(c)},
          {"parallel_tool_calls", true},
          {"previous_response_id", body.value("previous_response_id", J(nullptr))},
          {"reasoning", {{"effort", body.contains("reasoning") && body["reasoning"].is_object() ? body["reasoning"].value("effort", J(nullptr)) : J(nullptr)}, {"summary", nullptr}}},
          {"store", body.value("store", J(true))},
          {"temperature", req.temperature},
          {"text", {{"format", {{"type", "text"}}}}},
          {"tool_choice", body.contains("tool_choice") && !body["tool_choice"].is_null() ? body["tool_choice"] : J("auto")},
          {"tools", tools},
          {"top_p", req.top_p},
          {"truncation", "disabled"},
          {"usage", nullptr},
          {"metadata", body.value("metadata", J::object())}};
}

}  // namespace areal::proxy
