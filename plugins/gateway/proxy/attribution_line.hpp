// Claude Code's attribution line: the first system text block it sends
// begins "x-anthropic-billing-header: cc_version=<version>.<hash of the
// conversation's first user message>; cc_entrypoint=...;". It is billing
// data for Anthropic's API, not instructions, and in a prompt it puts a
// per-conversation hash in front of the tens of thousands of tokens of
// system prompt every conversation shares, so no prefix cache could share
// them. vLLM drops the line from system text too, on /v1/messages and on
// chat completions (which gateways translating Anthropic requests send).
#pragma once

#include <optional>
#include <string>

namespace areal::proxy {

// `text` without its attribution line (the first line) when it starts with
// one, possibly empty; nullopt when it does not.
inline std::optional<std::string> without_attribution_line(const std::string& text) {
  static const std::string kHeader = "x-anthropic-billing-header:";
  if (text.compare(0, kHeader.size(), kHeader) != 0) return std::nullopt;
  const size_t end = text.find('\n');
  return end == std::string::npos ? std::string() : text.substr(end + 1);
}

}  // namespace areal::proxy
