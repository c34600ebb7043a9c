// Incremental reasoning/content splitting for streamed replies, shared by
// the OpenAI, Responses and Anthropic streaming routes: the same rules as
// proxy::parse_output, applied to a growing prefix, holding back text that
// could still turn into a tag or a tool call of the configured family.
//
// While streaming: reasoning as it grows (trimmed; a suffix that could
// become </think> waits); content up to the first tool-call marker of the
// family (held back from there to the end, as is a suffix that could still
// become a marker, trailing white space when tools are on, and for llama3
// content whose first non-blank character is '{'). At the end the rest is
// sent from parse_output's own split, so the concatenated deltas equal the
// non-streaming reasoning and content (tool-call markup never shows; a call
// the parser could not read appears at the end as the text it is). The one
// exception is qwen3 with a </think> the output never opened: text already
// sent as content cannot be taken back (deepseek_r1 is the parser for
// templates whose prompt opens <think>).
#pragma once

#include <string>

#include "plugins/gateway/proxy/output_parser.hpp"

namespace areal::gateway {

class StreamSplitter {
 public:
  // `parsers`: the resolved parser names (ChatService::config().parsers);
  // `tools_enabled`: the request has tools and tool_choice is not "none".
  StreamSplitter(const proxy::OutputParserConfig& parsers, bool tools_enabled);

  // Appends raw generated text; returns the reasoning and content deltas
  // that became safe to show (`final`: nothing more will come).
  void push(const std::string& raw_delta, bool final, std::string& reasoning_delta, std::string& content_delta);

 private:
  proxy::OutputParserConfig config_;
  bool tools_;
  std::string raw_;
  std::string sent_reasoning_, sent_content_;
};

}  // namespace areal::gateway
