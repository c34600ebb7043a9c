// Splits generated text into reasoning, content and tool calls, with one
// parser per model family (names as SGLang's --reasoning-parser and
// --tool-call-parser use them).
//
// Reasoning parsers:
//   qwen3:       text inside <think>...</think> at the start of the output;
//                an output that contains </think> without the opening tag
//                (the prompt already opened it) counts everything before it
//                as reasoning; an output with neither tag is all content.
//   deepseek_r1: the generation prompt opened <think> already: everything up
//                to </think> is reasoning (an optional leading <think> is
//                dropped), and an output with no </think> at all is entirely
//                reasoning (cut off while thinking).
//   none:        no split.
//
// Tool-call parsers (only read outside the reasoning):
//   qwen, hermes: <tool_call>{"name": ..., "arguments": ...}</tool_call>
//   qwen3_coder:  <tool_call>\n<function=NAME>\n<parameter=P>\nVALUE\n</parameter>\n...</function>\n</tool_call>
//                 (values typed by the request's tool schema, see parse_output)
//   llama3:       [<|python_tag|>]{"name": ..., "parameters"|"arguments": ...}[; {...}]
//                 after <|python_tag|>, or an output that is only such JSON
//   mistral:      [TOOL_CALLS] [{"name": ..., "arguments": ...}, ...]
//                 or [TOOL_CALLS]NAME[ARGS]{...} (repeated for several calls)
//   deepseek_v3:  <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\nARGS\n```<｜tool▁call▁end｜>...<｜tool▁calls▁end｜>
//   none:         no tool calls.
// A block the parser recognises as a call attempt but cannot read (bad JSON,
// missing end tag, no function name) stays in the content as text and is
// counted in ParsedOutput::unreadable_tool_calls.
//
// Content: what remains once reasoning and calls are removed. After
// reasoning its leading newlines are dropped (the template's "\n\n" after
// </think>); when calls were read, trailing white space is dropped too.
#pragma once

#include <cstddef>
#include <functional>
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
  size_t unreadable_tool_calls = 0;  // call attempts left in `content` as text
};

struct OutputParserConfig {
  // "auto" | "qwen3" | "deepseek_r1" | "none"
  std::string reasoning_parser = "auto";
  // "auto" | "qwen" | "hermes" | "qwen3_coder" | "llama3" | "mistral" | "deepseek_v3" | "none"
  std::string tool_call_parser = "auto";
  // The reasoning parser for requests that turn thinking off
  // (chat_template_kwargs.enable_thinking false; empty: reasoning_parser).
  // A template whose generation prompt opens <think> by default may write a
  // closed <think></think> instead when thinking is off (Qwen3.5's): the
  // reply then starts outside a think block. Set by resolve_parsers.
  std::string reasoning_parser_thinking_off;
  // mistral only: the template writes calls as [TOOL_CALLS]NAME[ARGS]{...}
  // (newer Mistral models) rather than a JSON array; decides the forced-call
  // prefix (both forms are read). Set by resolve_parsers from the template.
  bool mistral_compact = false;
  // Called by parse_output with the tool-call parser's name when an output
  // had unreadable call attempts (the gateway counts them on /metrics).
  std::function<void(const std::string& parser, size_t count)> on_unreadable_tool_calls;
};

// The parser names accepted in configuration.
const std::vector<std::string>& reasoning_parser_names();
const std::vector<std::string>& tool_call_parser_names();

// Replaces "auto" by a concrete parser chosen from the chat template, and
// checks the names (areal::Error INVALID_ARGUMENT for an unknown one).
//   tool_call_parser auto, first rule that matches the template source:
//     "<function=" and "<parameter="            -> qwen3_coder
//     "<tool_call>"                             -> qwen
//     "<｜tool▁calls▁begin｜>"                  -> deepseek_v3
//     "[TOOL_CALLS]"                            -> mistral
//     "<|python_tag|>", or "<|start_header_id|>"
//       with a "parameters" JSON tool prompt    -> llama3
//     otherwise                                 -> none
//   reasoning_parser auto:
//     the template never mentions <think> / </think>      -> none
//     the generation prompt opens <think> (DeepSeek R1,
//       QwQ, Qwen3 *-Thinking-2507)                       -> deepseek_r1
//     otherwise                                           -> qwen3
//   "The generation prompt opens <think>": `generation_prompt` (the template
//   rendered for one user message with add_generation_prompt, when the
//   caller could render it) ends with <think> once trailing white space is
//   dropped; without it, the source has an assistant-turn opening directly
//   followed by <think> ("<｜Assistant｜><think>" or
//   "<|im_start|>assistant\n<think>" inside one string).
// Also sets mistral_compact when the template contains "[ARGS]".
// reasoning_parser auto also decides reasoning_parser_thinking_off by the
// same rule from `thinking_off_prompt` (the generation prompt rendered with
// enable_thinking false), when the caller could render it.
OutputParserConfig resolve_parsers(const OutputParserConfig& config, const std::string& chat_template_source,
                                   const std::string& generation_prompt = "", const std::string& thinking_off_prompt = "");

// A new tool call's id: `prefix` ("call_", "toolu_") and 24 hex digits;
// with the mistral parser 9 letters and digits, no prefix (the only ids
// Mistral's templates accept).
std::string tool_call_id(const OutputParserConfig& config, const std::string& prefix);

// The parsers for one request: with thinking turned off
// (`enable_thinking` false), reasoning_parser_thinking_off where set.
OutputParserConfig parsers_for_request(const OutputParserConfig& resolved, const nlohmann::ordered_json& chat_template_kwargs);

// `tools`: the request's OpenAI tools array (or null); qwen3_coder uses each
// function's parameters schema to type its string values:
//   declared "string" (or no conversion possible)          -> JSON string
//   declared integer / number / boolean / object / array
//     / null, and the value reads as one                   -> that JSON value
//   "null" for a parameter not declared a string           -> null
//   type unknown (tool or parameter not in the schema, or
//     no type / anyOf) and the value is valid JSON          -> that JSON value
//   otherwise                                              -> JSON string
// Config names must be concrete (not "auto"): resolve_parsers first.
ParsedOutput parse_output(const std::string& text, const OutputParserConfig& config, bool tools_enabled,
                          const std::string& tool_call_id_prefix = "call_",
                          const nlohmann::ordered_json& tools = nlohmann::ordered_json());

// What a forced tool call starts with, appended to the prompt so the model
// samples only the rest, in the format the parser reads back:
//   qwen/hermes:  "<tool_call>\n", named: + {"name": "<tool>", "arguments": 
//   qwen3_coder:  "<tool_call>\n", named: + "<function=<tool>>\n"
//   llama3:       {"name": "           named: {"name": "<tool>", "parameters": 
//                 (forced_tool_call_grammar's prefix for required is "": its JSON holds the name)
//   mistral:      "[TOOL_CALLS]", named: + "<tool>[ARGS]" (compact) or
//                 " [{\"name\": \"<tool>\", \"arguments\": " (JSON array)
//   deepseek_v3:  "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>",
//                 named: + "<tool>\n```json\n"
// With the deepseek_r1 reasoning parser the prompt has opened <think>, so
// the prefix first closes it ("</think>\n\n"). Empty when the parser is
// "none" (nothing would read the call).
std::string forced_tool_call_prefix(const OutputParserConfig& config, const std::string& tool_name);

// A forced tool call as constrained decoding: after forced_tool_call_prefix()
// the model samples only text that `schema` (a JSON Schema) accepts, then a
// turn end; the call is closed by `suffix`, text the parser reads after the
// sampled JSON but that is never sampled nor recorded (the tokens recorded
// are the prefix, in the prompt, and the JSON + turn end). `constrained` is
// false where the family's call is not JSON after the prefix (qwen3_coder's
// XML, deepseek_v3 and compact mistral with no name) or a tool's parameters
// use what the schema compiler does not take: the call is then prompted by
// the prefix only. Named: the schema is the tool's parameters; required:
// one of {name: const, arguments/parameters: that tool's parameters}.
struct ForcedCallGrammar {
  bool constrained = false;
  std::string prefix;  // what the prompt ends with: forced_tool_call_prefix(), or less when the schema covers it
  nlohmann::ordered_json schema;
  std::string suffix;
};
ForcedCallGrammar forced_tool_call_grammar(const OutputParserConfig& config, const std::string& tool_name, const nlohmann::ordered_json& tools);

// What a structured-output reply starts with: "</think>\n\n" when the
// prompt opened <think> (deepseek_r1), so the constrained JSON is the
// answer and not the reasoning; else nothing.
std::string structured_output_prefix(const OutputParserConfig& config);

// Where the first tool-call attempt of the configured family starts in
// `content` (text outside the reasoning), or npos. For llama3 plain JSON:
// the first non-blank character when it is '{'. The streaming splitter holds
// back everything from here.
size_t first_tool_call_marker(const std::string& content, const OutputParserConfig& config);

// The markers of the configured family (for holding back a suffix of a
// stream that could still become one).
std::vector<std::string> tool_call_markers(const OutputParserConfig& config);

}  // namespace areal::proxy
