#include "areal/core/proxy/responses.hpp"

#include "areal/core/error.hpp"

namespace areal::proxy {
namespace {

using J = nlohmann::ordered_json;

[[noreturn]] void bad(const std::string& field, const std::string& why) {
  throw Error(AREAL_CODE_INVALID_ARGUMENT, "'" + field + "': " + why);
}

std::string parts_text(const J& content, const std::string& where) {
  if (content.is_string()) return content;
  if (!content.is_array()) bad(where, "must be a string or an array of content parts");
  std::string out;
  for (const auto& p : content) {
    const std::string type = p.is_object() ? p.value("type", "") : "";
    if (type != "input_text" && type != "output_text" && type != "text")
      bad(where, "content part type '" + type + "' is not supported (input_text, output_text)");
    out += p.value("text", "");
  }
  return out;
}

std::string suffix_of(const std::string& id) { return id.substr(id.find('-') + 1); }

}  // namespace

ChatRequest responses_to_chat_request(const J& body) {
  for (const char* unsupported : {"previous_response_id", "conversation", "background", "prompt"})
    if (body.contains(unsupported) && !body[unsupported].is_null())
      bad(unsupported, "is not supported: send the conversation in 'input' (the proxy must see every token)");
  if (body.contains("include") && body["include"].is_array() && !body["include"].empty()) bad("include", "is not supported");
  if (!body.contains("input")) bad("input", "is required");
  J messages = J::array();
  if (body.contains("instructions") && !body["instructions"].is_null()) {
    if (!body["instructions"].is_string()) bad("instructions", "must be a string");
    messages.push_back({{"role", "system"}, {"content", body["instructions"]}});
  }
  const J& input = body["input"];
  if (input.is_string()) {
    messages.push_back({{"role", "user"}, {"content", input}});
  } else if (input.is_array()) {
    // One assistant turn arrives as consecutive items (reasoning, message,
    // function calls); they merge into one assistant message.
    auto assistant = [&]() -> J& {
      if (messages.empty() || messages.back().value("role", "") != "assistant") messages.push_back({{"role", "assistant"}, {"content", ""}});
      return messages.back();
    };
    for (size_t i = 0; i < input.size(); ++i) {
      const J& item = input[i];
      const std::string where = "input[" + std::to_string(i) + "]";
      if (!item.is_object()) bad(where, "must be an object");
      const std::string type = item.value("type", item.contains("role") ? "message" : "");
      if (type == "message") {
        const std::string role = item.value("role", "");
        if (role != "user" && role != "system" && role != "developer" && role != "assistant") bad(where + ".role", "must be user, system, developer or assistant");
        const std::string text = parts_text(item.value("content", J("")), where + ".content");
        if (role == "assistant") {
          J& a = assistant();
          a["content"] = a["content"].get<std::string>() + text;
        } else {
          messages.push_back({{"role", role == "developer" ? "system" : role}, {"content", text}});
        }
      } else if (type == "reasoning") {
        std::string text;
        for (const auto& s : item.value("summary", J::array())) text += s.value("text", "");
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
        messages.push_back({{"role", "tool"}, {"tool_call_id", item["call_id"]}, {"content", out.is_string() ? out.get<std::string>() : out.dump()}});
      } else {
        bad(where + ".type", "item type '" + type + "' is not supported (message, reasoning, function_call, function_call_output)");
      }
    }
  } else {
    bad("input", "must be a string or an array of items");
  }
  J openai = {{"messages", messages}};
  if (body.contains("max_output_tokens") && !body["max_output_tokens"].is_null()) openai["max_tokens"] = body["max_output_tokens"];
  for (const char* k : {"temperature", "top_p", "stream", "model", "store"})
    if (body.contains(k) && !body[k].is_null()) openai[k] = body[k];
  if (body.contains("tools") && body["tools"].is_array()) {
    J tools = J::array();
    for (const auto& t : body["tools"]) {
      if (t.value("type", "") != "function") bad("tools", "only function tools are supported, not '" + t.value("type", std::string("?")) + "'");
      tools.push_back({{"type", "function"},
                       {"function", {{"name", t.value("name", "")}, {"description", t.value("description", "")}, {"parameters", t.value("parameters", J::object())}}}});
    }
    if (!tools.empty()) openai["tools"] = tools;
  }
  if (body.contains("tool_choice") && !body["tool_choice"].is_null()) {
    const J& tc = body["tool_choice"];
    if (tc.is_string()) openai["tool_choice"] = tc;
    else bad("tool_choice", "forcing a specific tool needs constrained decoding; use auto");
  }
  if (body.contains("reasoning") && body["reasoning"].is_object() && body["reasoning"].contains("effort") && !body["reasoning"]["effort"].is_null()) {
    // The only control Qwen-style templates have: thinking on or off.
    openai["chat_template_kwargs"] = {{"enable_thinking", body["reasoning"]["effort"] != "minimal" && body["reasoning"]["effort"] != "none"}};
  }
  if (body.contains("text") && body["text"].is_object() && body["text"].contains("format") && body["text"]["format"].value("type", "text") != "text")
    bad("text.format", "structured output needs constrained decoding, which this proxy does not do");
  ChatRequest r;
  try {
    r = parse_chat_request(openai);
  } catch (const Error& e) {
    throw Error(e.code(), std::string("(as a chat request) ") + e.what());
  }
  return r;
}

J responses_output(const ChatService::Completed& c) {
  const std::string sfx = suffix_of(c.id);
  J items = J::array();
  if (c.parsed.has_reasoning)
    items.push_back({{"type", "reasoning"}, {"id", "rs_" + sfx}, {"summary", J::array({{{"type", "summary_text"}, {"text", c.parsed.reasoning}}})}});
  if (!c.parsed.content.empty() || c.parsed.tool_calls.empty())
    items.push_back({{"type", "message"}, {"id", "msg_" + sfx}, {"status", "completed"}, {"role", "assistant"},
                     {"content", J::array({{{"type", "output_text"}, {"text", c.parsed.content}, {"annotations", J::array()}}})}});
  for (const auto& t : c.parsed.tool_calls)
    items.push_back({{"type", "function_call"}, {"id", "fc_" + t.id.substr(5)}, {"call_id", t.id}, {"name", t.name},
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
  return {{"id", "resp_" + suffix_of(c.id)},
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
          {"previous_response_id", nullptr},
          {"reasoning", {{"effort", nullptr}, {"summary", nullptr}}},
          {"store", req.store},
          {"temperature", req.temperature},
          {"text", {{"format", {{"type", "text"}}}}},
          {"tool_choice", req.tool_choice},
          {"tools", tools},
          {"top_p", req.top_p},
          {"truncation", "disabled"},
          {"usage", nullptr},
          {"metadata", body.value("metadata", J::object())}};
}

}  // namespace areal::proxy
