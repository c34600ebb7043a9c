#include "plugins/gateway/proxy/output_parser.hpp"
#include "core/text/json_depth.hpp"

#include <algorithm>
#include <cctype>
#include <optional>

#include "core/plugin_host/error.hpp"
#include "core/text/random_text.hpp"

namespace areal::proxy {
namespace {

using J = nlohmann::ordered_json;

// DeepSeek V3's special tokens (fullwidth bar U+FF5C, lower block U+2581).
const std::string kDsCallsBegin = "<｜tool▁calls▁begin｜>";
const std::string kDsCallsEnd = "<｜tool▁calls▁end｜>";
const std::string kDsCallBegin = "<｜tool▁call▁begin｜>";
const std::string kDsCallEnd = "<｜tool▁call▁end｜>";
const std::string kDsSep = "<｜tool▁sep｜>";
const std::string kToolCall = "<tool_call>", kToolCallEnd = "</tool_call>";
const std::string kPythonTag = "<|python_tag|>";
const std::string kMistralCalls = "[TOOL_CALLS]";
const std::string kThinkOpen = "<think>", kThinkClose = "</think>";

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  const auto e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

std::string rtrim(const std::string& s) {
  const auto e = s.find_last_not_of(" \t\r\n");
  return e == std::string::npos ? std::string() : s.substr(0, e + 1);
}

// Content after </think> starts with the template's "\n\n"; clients expect
// the answer itself (Qwen3's template strips these newlines when rendering).
std::string trim_leading_newlines(const std::string& s) {
  const auto b = s.find_first_not_of("\r\n");
  return b == std::string::npos ? std::string() : s.substr(b);
}

size_t skip_space(const std::string& s, size_t p) {
  while (p < s.size() && is_space(s[p])) ++p;
  return p;
}

bool starts_with_at(const std::string& s, size_t p, const std::string& what) { return s.compare(p, what.size(), what) == 0; }

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// One past the end of the JSON object or array starting at s[p] ('{' or
// '['), matching brackets outside strings; npos when it does not close.
size_t json_end(const std::string& s, size_t p) {
  if (p >= s.size() || (s[p] != '{' && s[p] != '[')) return std::string::npos;
  int depth = 0;
  bool in_string = false;
  for (size_t i = p; i < s.size(); ++i) {
    const char c = s[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '{' || c == '[') ++depth;
    else if ((c == '}' || c == ']') && --depth == 0) return i + 1;
  }
  return std::string::npos;
}

bool parse_json(const std::string& text, J& out) {
  out = areal::text::parse_json_bounded_or_discarded<J>(text);
  return !out.is_discarded();
}

std::string dump(const J& j) { return j.dump(-1, ' ', false, J::error_handler_t::replace); }

struct Call {
  std::string name;
  std::string arguments;
};

// {"name": ..., "arguments" | "parameters": ...} -> a call. Arguments given
// as a string are taken verbatim (some models write the JSON as a string).
bool read_call_object(const J& j, bool require_arguments, Call& call) {
  if (!j.is_object() || !j.contains("name") || !j["name"].is_string() || j["name"].get<std::string>().empty()) return false;
  const char* key = j.contains("arguments") ? "arguments" : (j.contains("parameters") ? "parameters" : nullptr);
  if (key == nullptr && require_arguments) return false;
  const J args = key == nullptr ? J::object() : j[key];
  call = {j["name"].get<std::string>(), args.is_string() ? args.get<std::string>() : dump(args)};
  return true;
}

// One tool-call attempt found at a marker: the calls it holds, or not read.
struct Attempt {
  bool ok = false;
  bool counted = true;  // a failed attempt that was a real call attempt (not plain JSON content)
  size_t end = std::string::npos;
  std::vector<Call> calls;
};

// ---- qwen / hermes -------------------------------------------------------

// The inside of the <tool_call>...</tool_call> block opening at b, and where
// the attempt ends (the rest of the text when the block is unterminated).
std::optional<std::string> tool_call_block(const std::string& s, size_t b, Attempt& a) {
  const size_t e = s.find(kToolCallEnd, b + kToolCall.size());
  if (e == std::string::npos) {
    a.end = s.size();
    return std::nullopt;
  }
  a.end = e + kToolCallEnd.size();
  return s.substr(b + kToolCall.size(), e - b - kToolCall.size());
}

Attempt read_qwen(const std::string& s, size_t b) {
  Attempt a;
  const auto block = tool_call_block(s, b, a);
  if (!block) return a;
  J j;
  Call c;
  if (parse_json(trim(*block), j) && read_call_object(j, false, c)) {
    a.calls.push_back(c);
    a.ok = true;
  }
  return a;
}

// ---- qwen3_coder ---------------------------------------------------------

// The `properties` schema of `param` of function `fn` in an OpenAI tools
// array; null when unknown.
J param_schema(const J& tools, const std::string& fn, const std::string& param) {
  if (!tools.is_array()) return nullptr;
  for (const auto& t : tools) {
    if (!t.is_object()) continue;
    const J& f = t.contains("function") && t["function"].is_object() ? t["function"] : t;
    if (!f.contains("name") || f["name"] != fn) continue;
    if (!f.contains("parameters") || !f["parameters"].is_object()) return nullptr;
    const J& p = f["parameters"];
    if (!p.contains("properties") || !p["properties"].is_object() || !p["properties"].contains(param)) return nullptr;
    return p["properties"][param];
  }
  return nullptr;
}

// The declared type of a parameter schema ("" when unknown); a list of
// types counts as its first type other than "null".
std::string declared_type(const J& schema) {
  if (!schema.is_object() || !schema.contains("type")) return "";
  const J& t = schema["type"];
  if (t.is_string()) return lower(t.get<std::string>());
  if (t.is_array())
    for (const auto& x : t)
      if (x.is_string() && x != "null") return lower(x.get<std::string>());
  return "";
}

J typed_value(const std::string& raw, const J& schema) {
  const std::string type = declared_type(schema);
  J parsed;
  const bool is_json = parse_json(trim(raw), parsed);
  if (type.empty()) return is_json ? parsed : J(raw);  // unknown type: JSON when it reads as JSON
  if (type == "string" || type == "str" || type == "text" || type == "varchar" || type == "char" || type == "enum") return raw;
  if (lower(trim(raw)) == "null") return nullptr;
  if (type.rfind("int", 0) == 0 || type == "number" || type == "float" || type == "double" || type == "long")
    return is_json && parsed.is_number() ? parsed : J(raw);
  if (type == "boolean" || type == "bool") {
    const std::string v = lower(trim(raw));
    return v == "true" ? J(true) : v == "false" ? J(false) : J(raw);
  }
  if (type == "object" || type == "dict") return is_json && parsed.is_object() ? parsed : J(raw);
  if (type == "array" || type == "list") return is_json && parsed.is_array() ? parsed : J(raw);
  return is_json ? parsed : J(raw);
}

// <function=NAME> <parameter=P>\nVALUE\n</parameter> ... </function>, one or
// more, and nothing else but white space. A missing </parameter> ends the
// value at the next <parameter= or the end of the function; a missing
// </function> ends it at the end of the block.
bool read_coder_functions(const std::string& body, const J& tools, std::vector<Call>& calls) {
  const std::string fopen = "<function=", fclose = "</function>", popen = "<parameter=", pclose = "</parameter>";
  size_t p = skip_space(body, 0);
  while (p < body.size()) {
    if (!starts_with_at(body, p, fopen)) return false;
    const size_t name_end = body.find('>', p);
    if (name_end == std::string::npos) return false;
    const std::string name = trim(body.substr(p + fopen.size(), name_end - p - fopen.size()));
    if (name.empty() || name.find_first_of("<\n") != std::string::npos) return false;
    size_t fend = body.find(fclose, name_end);
    const std::string fbody = body.substr(name_end + 1, (fend == std::string::npos ? body.size() : fend) - name_end - 1);
    J args = J::object();
    size_t q = skip_space(fbody, 0);
    while (q < fbody.size()) {
      if (!starts_with_at(fbody, q, popen)) return false;
      const size_t pname_end = fbody.find('>', q);
      if (pname_end == std::string::npos) return false;
      const std::string pname = trim(fbody.substr(q + popen.size(), pname_end - q - popen.size()));
      if (pname.empty() || pname.find_first_of("<\n") != std::string::npos) return false;
      const size_t vstart = pname_end + 1;
      size_t vend = fbody.find(pclose, vstart);
      const size_t next = fbody.find(popen, vstart);
      size_t after;
      if (vend == std::string::npos || (next != std::string::npos && next < vend)) {
        vend = next == std::string::npos ? fbody.size() : next;
        after = vend;
      } else {
        after = vend + pclose.size();
      }
      std::string value = fbody.substr(vstart, vend - vstart);
      if (!value.empty() && value.front() == '\n') value.erase(0, 1);
      if (!value.empty() && value.back() == '\n') value.pop_back();
      args[pname] = typed_value(value, param_schema(tools, name, pname));
      q = skip_space(fbody, after);
    }
    calls.push_back({name, dump(args)});
    p = skip_space(body, fend == std::string::npos ? body.size() : fend + fclose.size());
  }
  return !calls.empty();
}

Attempt read_qwen3_coder(const std::string& s, size_t b, const J& tools) {
  Attempt a;
  const auto block = tool_call_block(s, b, a);
  if (!block) return a;
  a.ok = read_coder_functions(*block, tools, a.calls);
  if (!a.ok) a.calls.clear();
  return a;
}

// ---- llama3 --------------------------------------------------------------

// JSON objects separated by ';' from p; `end` is one past the last one.
bool read_json_call_list(const std::string& s, size_t p, bool require_arguments, std::vector<Call>& calls, size_t& end) {
  while (true) {
    p = skip_space(s, p);
    const size_t e = s[p] == '{' ? json_end(s, p) : std::string::npos;
    J j;
    Call c;
    if (e == std::string::npos || !parse_json(s.substr(p, e - p), j) || !read_call_object(j, require_arguments, c)) return false;
    calls.push_back(c);
    end = e;
    const size_t next = skip_space(s, e);
    if (next >= s.size() || s[next] != ';') return true;
    p = next + 1;
  }
}

Attempt read_llama3(const std::string& s, size_t b) {
  Attempt a;
  if (starts_with_at(s, b, kPythonTag)) {
    a.end = s.size();
    size_t end = 0;
    if (read_json_call_list(s, b + kPythonTag.size(), false, a.calls, end)) {
      a.ok = true;
      a.end = end;
    } else {
      a.calls.clear();
    }
    return a;
  }
  // Plain JSON: a call only if the whole content is the call list.
  a.end = s.size();
  size_t end = 0;
  if (read_json_call_list(s, b, true, a.calls, end) && skip_space(s, end) == s.size()) {
    a.ok = true;
    return a;
  }
  a.calls.clear();
  // Unreadable JSON counts as a call attempt only when it opens like one.
  const size_t k = skip_space(s, b + 1);
  a.counted = starts_with_at(s, k, "\"name\"");
  if (a.counted) {  // ... and it is not a well-formed JSON answer that merely has a "name"
    J j;
    const size_t e = json_end(s, b);
    if (e != std::string::npos && skip_space(s, e) == s.size() && parse_json(s.substr(b, e - b), j) && j.is_object() &&
        !j.contains("parameters") && !j.contains("arguments"))
      a.counted = false;
  }
  return a;
}

// ---- mistral -------------------------------------------------------------

Attempt read_mistral(const std::string& s, size_t b) {
  Attempt a;
  const size_t next_marker = s.find(kMistralCalls, b + kMistralCalls.size());
  a.end = next_marker == std::string::npos ? s.size() : next_marker;
  size_t p = skip_space(s, b + kMistralCalls.size());
  if (p < s.size() && s[p] == '[') {  // [TOOL_CALLS] [{"name": ..., "arguments": ...}, ...]
    const size_t e = json_end(s, p);
    J j;
    if (e == std::string::npos || !parse_json(s.substr(p, e - p), j) || !j.is_array() || j.empty()) return a;
    for (const auto& x : j) {
      Call c;
      if (!read_call_object(x, false, c)) {
        a.calls.clear();
        return a;
      }
      a.calls.push_back(c);
    }
    a.ok = true;
    a.end = e;
    return a;
  }
  // [TOOL_CALLS]NAME[ARGS]{...} (Mistral Small 3.1 writes NAME[CALL_ID]ID[ARGS]{...})
  const size_t args = s.find("[ARGS]", p);
  if (args == std::string::npos || (next_marker != std::string::npos && args > next_marker)) return a;
  std::string head = s.substr(p, args - p);
  const size_t call_id = head.find("[CALL_ID]");
  if (call_id != std::string::npos) head.resize(call_id);
  const std::string name = trim(head);
  if (name.empty() || name.find_first_of(" \t\r\n[]{}\"") != std::string::npos) return a;
  const size_t j0 = skip_space(s, args + 6);
  const size_t e = json_end(s, j0);
  J j;
  if (e == std::string::npos || !parse_json(s.substr(j0, e - j0), j) || !j.is_object()) return a;
  a.calls.push_back({name, dump(j)});
  a.ok = true;
  a.end = e;
  return a;
}

// ---- deepseek_v3 ---------------------------------------------------------

// One <｜tool▁call▁begin｜>...<｜tool▁call▁end｜> body: "function<｜tool▁sep｜>NAME\n```json\nARGS\n```"
// (V3), or "NAME<｜tool▁sep｜>ARGS" (V3.1).
bool read_deepseek_call(const std::string& seg, Call& c) {
  const size_t sep = seg.find(kDsSep);
  if (sep == std::string::npos) return false;
  const std::string before = trim(seg.substr(0, sep));
  const std::string after = seg.substr(sep + kDsSep.size());
  const std::string after_t = trim(after);
  std::string name, args;
  if (!after_t.empty() && after_t.front() == '{') {  // V3.1
    name = before;
    args = after_t;
  } else {
    const size_t nl = after.find('\n');
    if (nl == std::string::npos) return false;
    name = trim(after.substr(0, nl));
    std::string body = trim(after.substr(nl + 1));
    if (body.rfind("```json", 0) != 0 || body.size() < 10 || body.compare(body.size() - 3, 3, "```") != 0) return false;
    args = trim(body.substr(7, body.size() - 10));
  }
  J j;
  if (name.empty() || name.find_first_of(" \t\r\n") != std::string::npos || !parse_json(args, j) || !j.is_object()) return false;
  c = {name, dump(j)};
  return true;
}

Attempt read_deepseek_v3(const std::string& s, size_t b) {
  Attempt a;
  const size_t start = b + kDsCallsBegin.size();
  const size_t close = s.find(kDsCallsEnd, start);
  const size_t body_end = close == std::string::npos ? s.size() : close;
  a.end = close == std::string::npos ? s.size() : close + kDsCallsEnd.size();
  size_t p = skip_space(s, start);
  while (p < body_end) {
    if (!starts_with_at(s, p, kDsCallBegin)) break;
    const size_t e = s.find(kDsCallEnd, p);
    if (e == std::string::npos || e > body_end) break;
    Call c;
    if (!read_deepseek_call(s.substr(p + kDsCallBegin.size(), e - p - kDsCallBegin.size()), c)) break;
    a.calls.push_back(c);
    p = skip_space(s, e + kDsCallEnd.size());
  }
  a.ok = p >= body_end && !a.calls.empty();
  if (!a.ok) a.calls.clear();
  return a;
}

// ---- shared --------------------------------------------------------------

bool is_qwen_format(const std::string& p) { return p == "qwen" || p == "hermes"; }

size_t next_marker(const std::string& s, size_t pos, const OutputParserConfig& config) {
  const std::string& p = config.tool_call_parser;
  if (is_qwen_format(p) || p == "qwen3_coder") return s.find(kToolCall, pos);
  if (p == "deepseek_v3") return s.find(kDsCallsBegin, pos);
  if (p == "mistral") return s.find(kMistralCalls, pos);
  if (p == "llama3") {
    if (pos == 0) {
      const size_t lead = skip_space(s, 0);
      const size_t tag = s.find(kPythonTag);
      if (lead < s.size() && s[lead] == '{' && lead < tag) return lead;
      return tag;
    }
    return s.find(kPythonTag, pos);
  }
  return std::string::npos;
}

Attempt read_attempt(const std::string& s, size_t b, const OutputParserConfig& config, const J& tools) {
  const std::string& p = config.tool_call_parser;
  if (is_qwen_format(p)) return read_qwen(s, b);
  if (p == "qwen3_coder") return read_qwen3_coder(s, b, tools);
  if (p == "deepseek_v3") return read_deepseek_v3(s, b);
  if (p == "mistral") return read_mistral(s, b);
  return read_llama3(s, b);
}

void check_names(const OutputParserConfig& config, bool allow_auto) {
  auto known = [&](const std::vector<std::string>& names, const std::string& n) {
    return (allow_auto || n != "auto") && std::find(names.begin(), names.end(), n) != names.end();
  };
  auto list = [](const std::vector<std::string>& names) {
    std::string out;
    for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
    return out;
  };
  if (!known(reasoning_parser_names(), config.reasoning_parser))
    throw Error(AREAL_CODE_INVALID_ARGUMENT, "unknown reasoning_parser '" + config.reasoning_parser + "' (" + list(reasoning_parser_names()) + ")" +
                                                 (config.reasoning_parser == "auto" ? ": resolve_parsers first" : ""));
  if (!known(tool_call_parser_names(), config.tool_call_parser))
    throw Error(AREAL_CODE_INVALID_ARGUMENT, "unknown tool_call_parser '" + config.tool_call_parser + "' (" + list(tool_call_parser_names()) + ")" +
                                                 (config.tool_call_parser == "auto" ? ": resolve_parsers first" : ""));
}

bool contains(const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; }

// The source has an assistant-turn opening directly followed by <think>
// (written with an escaped or a real newline).
bool source_opens_think(const std::string& src) {
  for (const char* pattern : {"<｜Assistant｜><think>", "<|im_start|>assistant\\n<think>", "<|im_start|>assistant\n<think>",
                              "<|start_header_id|>assistant<|end_header_id|>\\n\\n<think>"})
    if (contains(src, pattern)) return true;
  return false;
}

}  // namespace

const std::vector<std::string>& reasoning_parser_names() {
  static const std::vector<std::string> names{"auto", "qwen3", "deepseek_r1", "none"};
  return names;
}

const std::vector<std::string>& tool_call_parser_names() {
  static const std::vector<std::string> names{"auto", "qwen", "hermes", "qwen3_coder", "llama3", "mistral", "deepseek_v3", "none"};
  return names;
}

namespace {

// reasoning_parser auto's rule (output_parser.hpp), for one generation prompt.
std::string auto_reasoning_parser(const std::string& src, const std::string& generation_prompt) {
  if (!contains(src, kThinkOpen) && !contains(src, kThinkClose)) return "none";
  const std::string g = rtrim(generation_prompt);
  const bool opens = !g.empty() ? g.size() >= kThinkOpen.size() && g.compare(g.size() - kThinkOpen.size(), kThinkOpen.size(), kThinkOpen) == 0
                                : source_opens_think(src);
  return opens ? "deepseek_r1" : "qwen3";
}

}  // namespace

std::string tool_call_id(const OutputParserConfig& config, const std::string& prefix) {
  // Mistral's templates raise on any tool-call id that is not 9 letters and
  // digits, in the assistant's calls and in the tool results that answer
  // them: the next turn of every tool loop would be refused (vLLM issues
  // such ids for this family too).
  if (config.tool_call_parser == "mistral") return text::random_text(9, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789");
  return prefix + text::random_hex(24);
}

OutputParserConfig parsers_for_request(const OutputParserConfig& resolved, const nlohmann::ordered_json& kwargs) {
  const bool thinking_off = kwargs.is_object() && kwargs.contains("enable_thinking") && kwargs["enable_thinking"].is_boolean() &&
                            !kwargs["enable_thinking"].get<bool>();
  if (!thinking_off || resolved.reasoning_parser_thinking_off.empty()) return resolved;
  OutputParserConfig out = resolved;
  out.reasoning_parser = resolved.reasoning_parser_thinking_off;
  return out;
}

OutputParserConfig resolve_parsers(const OutputParserConfig& config, const std::string& src, const std::string& generation_prompt,
                                   const std::string& thinking_off_prompt) {
  check_names(config, true);
  OutputParserConfig out = config;
  if (out.tool_call_parser == "auto") {
    if (contains(src, "<function=") && contains(src, "<parameter=")) out.tool_call_parser = "qwen3_coder";
    else if (contains(src, kToolCall)) out.tool_call_parser = "qwen";
    else if (contains(src, kDsCallsBegin)) out.tool_call_parser = "deepseek_v3";
    else if (contains(src, kMistralCalls)) out.tool_call_parser = "mistral";
    else if (contains(src, kPythonTag) || (contains(src, "<|start_header_id|>") && contains(src, "\"parameters\"")))
      out.tool_call_parser = "llama3";
    else out.tool_call_parser = "none";
  }
  if (out.reasoning_parser == "auto") {
    out.reasoning_parser = auto_reasoning_parser(src, generation_prompt);
    // Rendered or not, a prompt with thinking off that the template wrote
    // no differently decides nothing new.
    out.reasoning_parser_thinking_off =
        thinking_off_prompt.empty() || thinking_off_prompt == generation_prompt ? std::string() : auto_reasoning_parser(src, thinking_off_prompt);
  }
  out.mistral_compact = contains(src, "[ARGS]");
  return out;
}

std::vector<std::string> tool_call_markers(const OutputParserConfig& config) {
  const std::string& p = config.tool_call_parser;
  if (is_qwen_format(p) || p == "qwen3_coder") return {kToolCall};
  if (p == "deepseek_v3") return {kDsCallsBegin};
  if (p == "mistral") return {kMistralCalls};
  if (p == "llama3") return {kPythonTag};
  return {};
}

size_t first_tool_call_marker(const std::string& content, const OutputParserConfig& config) { return next_marker(content, 0, config); }

std::string structured_output_prefix(const OutputParserConfig& config) {
  return config.reasoning_parser == "deepseek_r1" ? kThinkClose + "\n\n" : std::string();
}

std::string forced_tool_call_prefix(const OutputParserConfig& config, const std::string& tool_name) {
  const std::string& p = config.tool_call_parser;
  if (p == "none" || p == "auto") return "";
  const std::string quoted = J(tool_name).dump();
  std::string prefix;
  if (is_qwen_format(p)) {
    prefix = kToolCall + "\n";
    if (!tool_name.empty()) prefix += "{\"name\": " + quoted + ", \"arguments\": ";
  } else if (p == "qwen3_coder") {
    prefix = kToolCall + "\n";
    if (!tool_name.empty()) prefix += "<function=" + tool_name + ">\n";
  } else if (p == "llama3") {
    prefix = tool_name.empty() ? std::string("{\"name\": \"") : "{\"name\": " + quoted + ", \"parameters\": ";
  } else if (p == "mistral") {
    prefix = kMistralCalls;
    if (!tool_name.empty()) prefix += config.mistral_compact ? tool_name + "[ARGS]" : " [{\"name\": " + quoted + ", \"arguments\": ";
  } else if (p == "deepseek_v3") {
    prefix = kDsCallsBegin + kDsCallBegin + "function" + kDsSep;
    if (!tool_name.empty()) prefix += tool_name + "\n```json\n";
  }
  if (config.reasoning_parser == "deepseek_r1") prefix = kThinkClose + "\n\n" + prefix;
  return prefix;
}

namespace {

// In a forced call, an object that declares its properties and says nothing
// of others takes no others, as xgrammar's strict mode (vLLM's and SGLang's
// default) compiles it: agents' tool schemas often leave
// additionalProperties out, and their frameworks refuse invented arguments.
J closed_objects(J s) {
  if (!s.is_object()) return s;
  if (s.contains("properties") && !s.contains("additionalProperties")) s["additionalProperties"] = false;
  for (const char* k : {"properties", "$defs", "definitions"})
    if (s.contains(k) && s[k].is_object())
      for (auto it = s[k].begin(); it != s[k].end(); ++it) *it = closed_objects(*it);
  for (const char* k : {"items", "additionalProperties"})
    if (s.contains(k) && s[k].is_object()) s[k] = closed_objects(s[k]);
  for (const char* k : {"anyOf", "oneOf", "prefixItems"})
    if (s.contains(k) && s[k].is_array())
      for (auto& sub : s[k]) sub = closed_objects(sub);
  return s;
}

}  // namespace

ForcedCallGrammar forced_tool_call_grammar(const OutputParserConfig& config, const std::string& tool_name, const nlohmann::ordered_json& tools) {
  ForcedCallGrammar g;
  g.prefix = forced_tool_call_prefix(config, tool_name);
  const std::string& p = config.tool_call_parser;
  auto parameters = [](const J& tool) {
    const J& f = tool.contains("function") ? tool["function"] : tool;
    return f.contains("parameters") && f["parameters"].is_object() ? closed_objects(f["parameters"]) : J{{"type", "object"}};
  };
  // required: one object per tool, its name a constant and its arguments that tool's parameters.
  auto any_call = [&](const char* args_key) {
    J options = J::array();
    if (tools.is_array())
      for (const auto& t : tools) {
        if (!t.contains("function") || !t["function"].contains("name")) continue;
        options.push_back({{"type", "object"},
                           {"properties", {{"name", {{"const", t["function"]["name"]}}}, {args_key, parameters(t)}}},
                           {"required", J::array({"name", args_key})},
                           {"additionalProperties", false}});
      }
    return J{{"anyOf", options}};
  };
  auto named_parameters = [&]() -> J {
    if (tools.is_array())
      for (const auto& t : tools)
        if (t.contains("function") && t["function"].value("name", std::string()) == tool_name) return parameters(t);
    return J{{"type", "object"}};
  };
  const bool named = !tool_name.empty();
  if (is_qwen_format(p)) {
    g.constrained = true;
    g.schema = named ? named_parameters() : any_call("arguments");
    g.suffix = (named ? "}\n" : "\n") + kToolCallEnd;
  } else if (p == "llama3") {
    g.constrained = true;
    g.schema = named ? named_parameters() : any_call("parameters");
    g.suffix = named ? "}" : "";
    if (!named) g.prefix = config.reasoning_parser == "deepseek_r1" ? kThinkClose + "\n\n" : "";
  } else if (p == "mistral" && named) {
    g.constrained = true;
    g.schema = named_parameters();
    g.suffix = config.mistral_compact ? "" : "}]";
  } else if (p == "mistral" && !config.mistral_compact) {
    g.constrained = true;
    g.prefix += " [";
    g.schema = any_call("arguments");
    g.suffix = "]";
  } else if (p == "deepseek_v3" && named) {
    g.constrained = true;
    g.schema = named_parameters();
    g.suffix = "\n```" + kDsCallEnd + kDsCallsEnd;
  }
  if (g.constrained && g.schema.contains("anyOf") && g.schema["anyOf"].empty()) g.constrained = false;  // no function tools
  return g;
}

ParsedOutput parse_output(const std::string& text, const OutputParserConfig& config, bool tools_enabled,
                          const std::string& tool_call_id_prefix, const nlohmann::ordered_json& tools) {
  check_names(config, false);
  ParsedOutput out;
  std::string rest = text;
  if (config.reasoning_parser == "qwen3") {
    const size_t lead = rest.find_first_not_of(" \t\r\n");
    const bool opened = lead != std::string::npos && rest.compare(lead, kThinkOpen.size(), kThinkOpen) == 0;
    const size_t start = opened ? lead + kThinkOpen.size() : 0;
    const size_t end = rest.find(kThinkClose, start);
    if (opened || end != std::string::npos) {
      out.has_reasoning = true;
      if (end == std::string::npos) {  // cut off while thinking: all of it is reasoning
        out.reasoning = trim(rest.substr(start));
        rest.clear();
      } else {
        out.reasoning = trim(rest.substr(start, end - start));
        rest = rest.substr(end + kThinkClose.size());
      }
    }
  } else if (config.reasoning_parser == "deepseek_r1") {
    const size_t lead = rest.find_first_not_of(" \t\r\n");
    if (lead != std::string::npos) {
      const size_t start = rest.compare(lead, kThinkOpen.size(), kThinkOpen) == 0 ? lead + kThinkOpen.size() : 0;
      const size_t end = rest.find(kThinkClose, start);
      out.has_reasoning = true;
      if (end == std::string::npos) {
        out.reasoning = trim(rest.substr(start));
        rest.clear();
      } else {
        out.reasoning = trim(rest.substr(start, end - start));
        rest = rest.substr(end + kThinkClose.size());
      }
    }
  }
  if (out.has_reasoning) rest = trim_leading_newlines(rest);
  if (tools_enabled && config.tool_call_parser != "none") {
    std::string kept;
    size_t pos = 0;
    while (pos < rest.size()) {
      const size_t b = next_marker(rest, pos, config);
      if (b == std::string::npos) break;
      Attempt a = read_attempt(rest, b, config, tools);
      kept += rest.substr(pos, b - pos);
      if (a.ok) {
        for (auto& c : a.calls) out.tool_calls.push_back({tool_call_id(config, tool_call_id_prefix), std::move(c.name), std::move(c.arguments)});
      } else {
        kept += rest.substr(b, a.end - b);
        if (a.counted) ++out.unreadable_tool_calls;
      }
      pos = a.end;
    }
    if (pos < rest.size()) kept += rest.substr(pos);
    rest = kept;
  }
  out.content = out.tool_calls.empty() ? rest : rtrim(rest);
  if (out.unreadable_tool_calls > 0 && config.on_unreadable_tool_calls) config.on_unreadable_tool_calls(config.tool_call_parser, out.unreadable_tool_calls);
  return out;
}

}  // namespace areal::proxy
