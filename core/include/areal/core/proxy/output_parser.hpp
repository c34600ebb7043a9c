// Splits generated text into reasoning, content and tool calls.
//
// Reasoning ("qwen3"): text inside <think>...</think> at the start of the
// output; an output that contains </think> without the opening tag (the
// prompt already opened it) counts everything before it as reasoning.
// Tool calls ("qwen" / "hermes"): <tool_call>{"name": ..., "arguments": ...}</tool_call>
// blocks outside the reasoning. A block whose JSON does not parse stays in
// the content as text.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace areal::proxy {

struct ToolCall {
  std::string id;         // "call_" + 24 hex
  std::string name;
  std::string arguments;  // a JSON text, as OpenAI returns it
};

struct ParsedOutput {
  std::string reasoning;  // without the tags; empty if none
  bool has_reasoning = false;
  std::string content;    // what remains, tool-call blocks removed
  std::vector<ToolCall> tool_calls;
};

struct OutputParserConfig {
  std::string reasoning_parser = "qwen3";  // "qwen3" | "none"
  std::string tool_call_parser = "qwen";   // "qwen" | "hermes" | "none"
};

ParsedOutput parse_output(const std::string& text, const OutputParserConfig& config, bool tools_enabled,
                          const std::string& tool_call_id_prefix = "call_");

// What a forced tool call starts with, appended to the prompt so the model
// samples only the rest: the parser's opening tag ("<tool_call>\n"), and for
// a named tool also `{"name": "<tool>", "arguments": `. Empty when the
// parser is "none" (nothing would read the call).
std::string forced_tool_call_prefix(const OutputParserConfig& config, const std::string& tool_name);

std::string random_hex(size_t n);

}  // namespace areal::proxy
