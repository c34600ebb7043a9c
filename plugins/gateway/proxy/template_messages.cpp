#include "plugins/gateway/proxy/template_messages.hpp"

#include <exception>

#include "core/plugin_host/error.hpp"
#include "core/text/json_depth.hpp"
#include "areal/plugin_api.h"

namespace areal::proxy {
namespace {

using J = nlohmann::ordered_json;

// A tool call's arguments as an object. Absent, null or "" is {} (a call
// without arguments); text that is not a JSON object is {} too, counted: it
// sits in the conversation's history, and refusing it would refuse every
// later turn of that conversation.
J arguments_object(const J& arguments, bool* coerced) {
  if (arguments.is_object()) return arguments;
  if (arguments.is_null() || (arguments.is_string() && arguments.get<std::string>().empty())) return J::object();
  if (arguments.is_string()) {
    try {
      J parsed = text::parse_json_bounded<J>(arguments.get<std::string>());
      if (parsed.is_object()) return parsed;
    } catch (const text::JsonTooDeep& e) {
      throw Error(AREAL_CODE_INVALID_ARGUMENT, std::string("a tool call's arguments: ") + e.what());
    } catch (const nlohmann::json::exception&) {  // not JSON, or a number past a double's range
    }
  }
  *coerced = true;
  return J::object();
}

// The text of a system message's content (strings by now: the request
// parsers turn parts into text).
std::string system_text(const J& m) {
  const J& c = m.contains("content") ? m["content"] : J();
  return c.is_string() ? c.get<std::string>() : std::string();
}

// Whether the template renders `messages` at all.
bool renders(const jinja::ChatTemplate& chat_template, const J& messages) {
  try {
    chat_template.render(messages, nullptr, false);
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

// A finished tool-calling turn whose call carries `arguments`.
J tool_turn(const J& arguments) {
  return J::array({{{"role", "user"}, {"content", "u"}},
                   {{"role", "assistant"}, {"content", nullptr},
                    {"tool_calls", J::array({{{"id", "c"}, {"type", "function"}, {"function", {{"name", "f"}, {"arguments", arguments}}}}})}},
                   {{"role", "tool"}, {"tool_call_id", "c"}, {"content", "r"}}});
}

}  // namespace

TemplateMessages::TemplateMessages(const jinja::ChatTemplate& chat_template) {
  folds_inline_system = !renders(chat_template, J::array({{{"role", "system"}, {"content", "s"}},
                                                          {{"role", "user"}, {"content", "u"}},
                                                          {{"role", "system"}, {"content", "s"}},
                                                          {{"role", "user"}, {"content", "u"}}}));
  // A few templates add the arguments to a string (DeepSeek V3.1's): they keep the client's text.
  arguments_as_objects = renders(chat_template, tool_turn(J{{"a", 1}})) || !renders(chat_template, tool_turn("{\"a\": 1}"));
}

std::string TemplateMessages::leading_system(const J& prepared) {
  return !prepared.empty() && prepared.front().value("role", "") == "system" ? system_text(prepared.front()) : std::string();
}

std::string TemplateMessages::system_texts(const J& messages) {
  std::string text;
  for (const J& m : messages) {
    if (m.value("role", "") != "system") continue;
    const std::string t = system_text(m);
    if (!t.empty()) text += (text.empty() ? "" : "\n") + t;
  }
  return text;
}

J TemplateMessages::prepare(const J& messages, const std::function<void(const std::string&)>& on_rewrite) const {
  J out = J::array();
  bool coerced = false, folded = false;
  for (const J& m : messages) {
    J copy = m;
    if (copy.contains("tool_calls") && copy["tool_calls"].is_array()) {
      if (copy["tool_calls"].empty()) {
        copy.erase("tool_calls");  // no calls: the template's plain assistant turn
      } else if (arguments_as_objects) {
        for (J& call : copy["tool_calls"]) {
          if (!call.is_object() || !call.contains("function") || !call["function"].is_object()) continue;
          J& fn = call["function"];
          fn["arguments"] = arguments_object(fn.contains("arguments") ? fn["arguments"] : J(), &coerced);
        }
      }
    }
    out.push_back(std::move(copy));
  }
  if (folds_inline_system) {
    bool inline_system = false;
    for (size_t i = 1; i < out.size(); ++i) inline_system = inline_system || out[i].value("role", "") == "system";
    if (inline_system) {
      // One system message first, holding every system text in order.
      J folded_out = J::array({{{"role", "system"}, {"content", system_texts(out)}}});
      for (J& m : out)
        if (m.value("role", "") != "system") folded_out.push_back(std::move(m));
      out = std::move(folded_out);
      folded = true;
    }
  }
  if (on_rewrite) {
    if (coerced) on_rewrite("tool_arguments_not_an_object");
    if (folded) on_rewrite("inline_system_folded");
  }
  return out;
}

}  // namespace areal::proxy
