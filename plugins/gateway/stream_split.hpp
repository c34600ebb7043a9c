// Incremental reasoning/content splitting for streamed replies, shared by
// the OpenAI and Anthropic streaming routes: the same rules as
// proxy::parse_output, applied to a growing prefix, holding back text that
// could still turn into a tag.
#pragma once

#include <string>

namespace areal::gateway {

class StreamSplitter {
 public:
  StreamSplitter(bool reasoning_parser, bool tools) : reasoning_(reasoning_parser), tools_(tools) {}

  // Appends raw generated text; returns the reasoning and content deltas
  // that became safe to show (`final`: nothing more will come).
  void push(const std::string& raw_delta, bool final, std::string& reasoning_delta, std::string& content_delta);

 private:
  bool reasoning_, tools_;
  std::string raw_;
  size_t sent_reasoning_ = 0, sent_content_ = 0;
};

}  // namespace areal::gateway
