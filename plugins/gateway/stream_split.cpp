#include "stream_split.hpp"

#include <algorithm>

namespace areal::gateway {
namespace {

// Length of the longest suffix of `s` that is a proper prefix of `tag`.
size_t partial_tag(const std::string& s, const std::string& tag) {
  for (size_t n = std::min(s.size(), tag.size() - 1); n > 0; --n)
    if (s.compare(s.size() - n, n, tag, 0, n) == 0) return n;
  return 0;
}

void split(const std::string& raw, bool reasoning_parser, bool tools, bool final, std::string& reasoning, std::string& content) {
  reasoning.clear();
  content.clear();
  std::string rest = raw;
  if (reasoning_parser) {
    const size_t lead = raw.find_first_not_of(" \t\r\n");
    const bool opened = lead != std::string::npos && raw.compare(lead, 7, "<think>") == 0;
    if (!opened && lead != std::string::npos && !final && std::string("<think>").compare(0, raw.size() - lead, raw, lead) == 0)
      return;  // could still become "<think>"
    const size_t start = opened ? lead + 7 : 0;
    const size_t end = raw.find("</think>", start);
    if (opened && end == std::string::npos) {
      reasoning = raw.substr(start);
      if (!final) reasoning.resize(reasoning.size() - partial_tag(reasoning, "</think>"));
      return;
    }
    if (end != std::string::npos) {
      reasoning = raw.substr(start, end - start);
      rest = raw.substr(end + 8);
    }
  }
  if (!reasoning.empty()) {  // the answer after </think> starts past the template's newlines
    const size_t first = rest.find_first_not_of("\r\n");
    rest = first == std::string::npos ? std::string() : rest.substr(first);
  }
  if (tools) {
    const size_t call = rest.find("<tool_call>");
    if (call != std::string::npos) rest.resize(call);
    else if (!final) rest.resize(rest.size() - partial_tag(rest, "<tool_call>"));
  }
  content = rest;
}

// Reasoning is trimmed at both ends like parse_output does; as deltas only
// grow, trailing white space waits until more text shows it is inside.
std::string trim_reasoning(const std::string& r) {
  const size_t b = r.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return std::string();
  return r.substr(b, r.find_last_not_of(" \t\r\n") - b + 1);
}

}  // namespace

void StreamSplitter::push(const std::string& raw_delta, bool final, std::string& reasoning_delta, std::string& content_delta) {
  raw_ += raw_delta;
  std::string reasoning, content;
  split(raw_, reasoning_, tools_, final, reasoning, content);
  reasoning = trim_reasoning(reasoning);
  reasoning_delta = reasoning.size() > sent_reasoning_ ? reasoning.substr(sent_reasoning_) : std::string();
  content_delta = content.size() > sent_content_ ? content.substr(sent_content_) : std::string();
  sent_reasoning_ = std::max(sent_reasoning_, reasoning.size());
  sent_content_ = std::max(sent_content_, content.size());
}

}  // namespace areal::gateway
