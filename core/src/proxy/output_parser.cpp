#include "areal/core/proxy/output_parser.hpp"

#include <random>

#include "areal/core/error.hpp"

namespace areal::proxy {
namespace {

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  const auto e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

// Content after </think> starts with the template's "\n\n"; clients expect
// the answer itself (Qwen3's template strips these newlines when rendering).
std::string trim_leading_newlines(const std::string& s) {
  const auto b = s.find_first_not_of("\r\n");
  return b == std::string::npos ? std::string() : s.substr(b);
}

}  // namespace

std::string random_hex(size_t n) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < n; ++i) out.push_back(kHex[rng() & 15]);
  return out;
}

std::string forced_tool_call_prefix(const OutputParserConfig& config, const std::string& tool_name) {
  if (config.tool_call_parser == "none") return "";
  std::string prefix = "<tool_call>\n";
  if (!tool_name.empty()) prefix += "{\"name\": " + nlohmann::json(tool_name).dump() + ", \"arguments\": ";
  return prefix;
}

ParsedOutput parse_output(const std::string& text, const OutputParserConfig& config, bool tools_enabled,
                          const std::string& tool_call_id_prefix) {
  if (config.reasoning_parser != "qwen3" && config.reasoning_parser != "none")
    throw Error(AREAL_CODE_INVALID_ARGUMENT, "unknown reasoning_parser '" + config.reasoning_parser + "' (qwen3, none)");
  if (config.tool_call_parser != "qwen" && config.tool_call_parser != "hermes" && config.tool_call_parser != "none")
    throw Error(AREAL_CODE_INVALID_ARGUMENT, "unknown tool_call_parser '" + config.tool_call_parser + "' (qwen, hermes, none)");
  ParsedOutput out;
  std::string rest = text;
  if (config.reasoning_parser == "qwen3") {
    const std::string open = "<think>", close = "</think>";
    const size_t lead = rest.find_first_not_of(" \t\r\n");
    const bool opened = lead != std::string::npos && rest.compare(lead, open.size(), open) == 0;
    const size_t start = opened ? lead + open.size() : 0;
    const size_t end = rest.find(close, start);
    if (opened || end != std::string::npos) {
      out.has_reasoning = true;
      if (end == std::string::npos) {  // cut off while thinking: all of it is reasoning
        out.reasoning = trim(rest.substr(start));
        rest.clear();
      } else {
        out.reasoning = trim(rest.substr(start, end - start));
        rest = rest.substr(end + close.size());
      }
    }
  }
  if (tools_enabled && config.tool_call_parser != "none") {
    const std::string open = "<tool_call>", close = "</tool_call>";
    std::string kept;
    size_t pos = 0;
    while (true) {
      const size_t b = rest.find(open, pos);
      if (b == std::string::npos) break;
      const size_t e = rest.find(close, b + open.size());
      if (e == std::string::npos) break;  // unterminated: leave as text
      const std::string body = trim(rest.substr(b + open.size(), e - b - open.size()));
      bool parsed = false;
      try {
        const auto j = nlohmann::ordered_json::parse(body);
        if (j.is_object() && j.contains("name") && j["name"].is_string()) {
          const auto& args = j.contains("arguments") ? j["arguments"] : (j.contains("parameters") ? j["parameters"] : nlohmann::ordered_json::object());
          out.tool_calls.push_back({tool_call_id_prefix + random_hex(24), j["name"], args.is_string() ? args.get<std::string>() : args.dump()});
          parsed = true;
        }
      } catch (const nlohmann::json::exception&) {
      }
      kept += rest.substr(pos, b - pos);
      if (!parsed) kept += rest.substr(b, e + close.size() - b);
      pos = e + close.size();
    }
    kept += rest.substr(pos);
    rest = kept;
  }
  out.content = out.tool_calls.empty() ? (out.has_reasoning ? trim_leading_newlines(rest) : rest) : trim(rest);
  return out;
}

}  // namespace areal::proxy
