#include "stream_split.hpp"

#include <algorithm>

namespace areal::gateway {
namespace {

const std::string kOpen = "<think>", kClose = "</think>";

// Length of the longest suffix of `s` that is a proper prefix of `tag`.
size_t partial_tag(const std::string& s, const std::string& tag) {
  for (size_t n = std::min(s.size(), tag.size() - 1); n > 0; --n)
    if (s.compare(s.size() - n, n, tag, 0, n) == 0) return n;
  return 0;
}

std::string trim(const std::string& r) {
  const size_t b = r.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return std::string();
  return r.substr(b, r.find_last_not_of(" \t\r\n") - b + 1);
}

// The reasoning and content of an unfinished output that are safe to show.
void split(const std::string& raw, const proxy::OutputParserConfig& config, bool tools, std::string& reasoning, std::string& content) {
  reasoning.clear();
  content.clear();
  std::string rest = raw;
  bool has_reasoning = false;
  const std::string& rp = config.reasoning_parser;
  if (rp == "qwen3" || rp == "deepseek_r1") {
    const size_t lead = raw.find_first_not_of(" \t\r\n");
    if (lead == std::string::npos) return;  // nothing but white space yet: it could still open <think>
    const bool opened = raw.compare(lead, kOpen.size(), kOpen) == 0;
    if (!opened && raw.size() - lead < kOpen.size() && kOpen.compare(0, raw.size() - lead, raw, lead) == 0)
      return;  // could still become "<think>"
    const size_t start = opened ? lead + kOpen.size() : 0;
    const size_t end = raw.find(kClose, start);
    if (end == std::string::npos && (opened || rp == "deepseek_r1")) {  // still thinking
      reasoning = raw.substr(start);
      reasoning.resize(reasoning.size() - partial_tag(reasoning, kClose));
      reasoning = trim(reasoning);
      return;
    }
    if (end != std::string::npos) {
      reasoning = trim(raw.substr(start, end - start));
      rest = raw.substr(end + kClose.size());
      has_reasoning = true;
    } else {
      rest.resize(rest.size() - partial_tag(rest, kClose));  // qwen3: content until a </think> shows
    }
  }
  if (has_reasoning) {  // the answer after </think> starts past the template's newlines
    const size_t first = rest.find_first_not_of("\r\n");
    rest = first == std::string::npos ? std::string() : rest.substr(first);
  }
  if (tools && config.tool_call_parser != "none") {
    const size_t call = proxy::first_tool_call_marker(rest, config);
    if (call != std::string::npos) {
      rest.resize(call);
    } else {
      size_t hold = 0;
      for (const auto& m : proxy::tool_call_markers(config)) hold = std::max(hold, partial_tag(rest, m));
      rest.resize(rest.size() - hold);
    }
    // Content before a call loses its trailing white space: wait until more text shows it is inside.
    const size_t last = rest.find_last_not_of(" \t\r\n");
    rest.resize(last == std::string::npos ? 0 : last + 1);
  }
  content = rest;
}

// What of `target` is new given what was sent. Sent text cannot be taken
// back: when `target` no longer extends it, the part after their common
// prefix is sent.
std::string newly_shown(const std::string& target, std::string& sent) {
  if (target.size() >= sent.size() && target.compare(0, sent.size(), sent) == 0) {
    std::string d = target.substr(sent.size());
    sent = target;
    return d;
  }
  if (sent.compare(0, target.size(), target) == 0) return std::string();  // nothing new
  size_t k = 0;
  while (k < target.size() && k < sent.size() && target[k] == sent[k]) ++k;
  sent = target;
  return target.substr(k);
}

}  // namespace

StreamSplitter::StreamSplitter(const proxy::OutputParserConfig& parsers, bool tools_enabled) : config_(parsers), tools_(tools_enabled) {
  config_.on_unreadable_tool_calls = nullptr;  // the service counts them once, not the stream again
}

void StreamSplitter::push(const std::string& raw_delta, bool final, std::string& reasoning_delta, std::string& content_delta) {
  raw_ += raw_delta;
  std::string reasoning, content;
  if (final) {
    const proxy::ParsedOutput parsed = proxy::parse_output(raw_, config_, tools_);
    reasoning = parsed.reasoning;
    content = parsed.content;
  } else {
    split(raw_, config_, tools_, reasoning, content);
  }
  reasoning_delta = newly_shown(reasoning, sent_reasoning_);
  content_delta = newly_shown(content, sent_content_);
}

}  // namespace areal::gateway
