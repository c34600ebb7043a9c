// Fuzz target: the Jinja engine, templates and values. Input: a chat
// template, then a NUL byte, then the messages as JSON (an array; anything
// else renders a fixed conversation). A template that does not parse, or
// that rejects its input, must say so with an areal::Error; a crash, a
// hang, runaway memory or a sanitizer report is a bug.
#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "core/hf/chat_template/chat_template.hpp"
#include "core/plugin_host/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  const std::string source = input.substr(0, nul);
  nlohmann::ordered_json messages = nlohmann::ordered_json::array(
      {{{"role", "system"}, {"content", "Be brief."}}, {{"role", "user"}, {"content", "Hi"}}, {{"role", "assistant"}, {"content", "Hello"}}});
  if (nul != std::string::npos) {
    const auto parsed = nlohmann::ordered_json::parse(input.substr(nul + 1), nullptr, false);
    if (parsed.is_array()) messages = parsed;
  }
  const nlohmann::ordered_json tools = nlohmann::ordered_json::array(
      {{{"type", "function"}, {"function", {{"name", "f"}, {"parameters", {{"type", "object"}}}}}}});
  try {
    const areal::jinja::ChatTemplate t(source, {{"bos_token", "<s>"}, {"eos_token", "</s>"}});
    t.render(messages, tools, true);
    t.render(messages, nullptr, false);
  } catch (const areal::Error&) {
  }
  return 0;
}
