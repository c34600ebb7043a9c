// What a served conversation becomes before the model's chat template
// renders it. transformers' apply_chat_template takes messages as they are;
// a serving engine prepares what API clients send first, and templates are
// written for that (vLLM's server does the same two things):
//   - a tool call's `arguments`, a JSON string on the wire, goes to the
//     template as the object it encodes: templates iterate it (`|items`,
//     Qwen3-Coder's and Qwen3.5's) or print it with `tojson` (Qwen2.5's,
//     Llama 3.1's), and the string would fail or print as a quoted string
//     (a template that renders only strings, adding them to its text as
//     DeepSeek V3.1's does, keeps them: probed once, as below);
//   - where the template refuses a system message after the first message
//     (a `loop.first` guard), every system message is folded into one at
//     the start: Claude Code sends system entries among the messages and
//     Codex two developer items before the user's.
// The request's own messages (what is recorded) are not changed.
#pragma once

#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "core/hf/chat_template/chat_template.hpp"

namespace areal::proxy {

struct TemplateMessages {
  // Probes the template once: does it render [system, user, system, user]?
  explicit TemplateMessages(const jinja::ChatTemplate& chat_template);

  // `messages` prepared for the template. `on_rewrite` hears what changed
  // beyond the parsing of well-formed arguments ("tool_arguments_not_an_object",
  // "inline_system_folded"), once per kind. Throws areal::Error
  // (INVALID_ARGUMENT) for arguments nested past text::kMaxJsonDepth.
  nlohmann::ordered_json prepare(const nlohmann::ordered_json& messages,
                                 const std::function<void(const std::string&)>& on_rewrite = nullptr) const;

  // The text of prepared messages' first message when it is a system one, else "".
  static std::string leading_system(const nlohmann::ordered_json& prepared);
  // Every system text of `messages` in order, joined with newlines: what a
  // fold puts first (and what a turn's system is, for concat linking).
  static std::string system_texts(const nlohmann::ordered_json& messages);

  bool folds_inline_system = false;
  bool arguments_as_objects = true;  // false: the template renders only the client's strings
};

}  // namespace areal::proxy
