// The compatibility policy (docs/http-api.md): every field of each API's
// schema is accepted (honoured or ignored and counted), the request shapes
// Claude Code and Codex CLI send are served and recorded, forced tool calls
// keep the forcing tokens out of what was sampled, and the endpoints agents
// call besides generation answer. Real HTTP on loopback, the real Qwen3
// tokenizer and template, the mock backend (scripted where a reply matters).
#include <cstdint>
#include <string>
#include <vector>
#include <map>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <tuple>

#include "gateway_fixture.hpp"
#include "test_temp_dir.hpp"

using nlohmann::ordered_json;

namespace {

class Compat : public GatewayFixture {
 protected:
  // The prompt (loss mask 0) and sampled (mask 1) parts of an exported row, decoded.
  std::pair<std::string, std::string> split_row(const ordered_json& row) {
    const auto ids = row["input_ids"].get<std::vector<int32_t>>();
    const auto mask = row["loss_mask"].get<std::vector<int32_t>>();
    std::vector<int32_t> prompt, sampled;
    for (size_t i = 0; i < ids.size(); ++i) (mask[i] ? sampled : prompt).push_back(ids[i]);
    return {tok_->decode(prompt), tok_->decode(sampled)};
  }
  static std::string ignored(const std::string& api, const std::string& field) {
    return "areal_gateway_ignored_fields_total{api=\"" + api + "\",field=\"" + field + "\"}";
  }
  static std::string unknown(const std::string& api, const std::string& field) {
    return "areal_gateway_unknown_fields_total{api=\"" + api + "\",field=\"" + field + "\"}";
  }
};

const ordered_json kWeatherTool = {{"type", "function"},
                                   {"function", {{"name", "get_weather"}, {"description", "Weather of a city"},
                                                 {"parameters", {{"type", "object"}, {"properties", {{"city", {{"type", "string"}}}}}}}}}};

TEST_F(Compat, ChatAcceptsEveryFieldOfItsSchemaAndCountsWhatItIgnores) {
  start("hf");
  const std::string key = start_session("chatfields");
  const ordered_json body = {
      {"messages", {{{"role", "system"}, {"content", "S"}}, {{"role", "developer"}, {"content", "D"}},
                    {{"role", "user"}, {"content", {{{"type", "text"}, {"text", "Look: "}}, {{"type", "image_url"}, {"image_url", {{"url", "data:image/png;base64,AAAA"}}}},
                                                    {{"type", "input_text"}, {"text", "and read this"}}}}}}},
      {"model", "gpt-4o"}, {"max_completion_tokens", 4}, {"temperature", 0.7}, {"top_p", 0.9}, {"stop", {"\n\n\n"}}, {"seed", 1},
      {"logprobs", true}, {"top_logprobs", 2}, {"stream", false}, {"tools", {kWeatherTool}}, {"tool_choice", "auto"},
      {"parallel_tool_calls", true}, {"n", 1}, {"store", true}, {"reasoning_effort", "low"}, {"response_format", {{"type", "json_object"}}},
      {"frequency_penalty", 0.1}, {"presence_penalty", 0.1}, {"logit_bias", {{"50256", -100}}}, {"metadata", {{"a", "b"}}},
      {"user", "u"}, {"safety_identifier", "s"}, {"prompt_cache_key", "k"}, {"prompt_cache_retention", "24h"}, {"service_tier", "auto"},
      {"verbosity", "low"}, {"modalities", {"text"}}, {"prediction", {{"type", "content"}, {"content", "x"}}}, {"web_search_options", ordered_json::object()},
      {"top_k", 5}, {"chat_template_kwargs", ordered_json::object()}, {"min_p", 0.1}, {"repetition_penalty", 1.0},
      {"x_brand_new_field", 1}};
  const double unknown_before = metric(unknown("chat", "x_brand_new_field"));
  const double image_before = metric(ignored("chat", "messages[].content[].image_url"));
  const double metadata_before = metric(ignored("chat", "metadata"));
  auto [status, reply] = post("/v1/chat/completions", body, key);
  ASSERT_EQ(status, 200) << reply.dump();
  EXPECT_EQ(reply["model"], "gpt-4o");
  EXPECT_EQ(reply["choices"].size(), 1u);
  EXPECT_EQ(metric(unknown("chat", "x_brand_new_field")), unknown_before + 1);
  EXPECT_EQ(metric(ignored("chat", "messages[].content[].image_url")), image_before + 1);
  EXPECT_EQ(metric(ignored("chat", "metadata")), metadata_before + 1);
  const auto exported = end_and_export(key, "chatfields-0");
  ASSERT_EQ(exported["rows"].size(), 1u);
  const auto [prompt, sampled] = split_row(exported["rows"][0]);
  EXPECT_NE(prompt.find("Look: \nand read this"), std::string::npos) << "a Responses-style input_text part is text: " << prompt;
  EXPECT_EQ(prompt.find("image"), std::string::npos) << "the image part is dropped, not rendered: " << prompt;
  EXPECT_NE(prompt.find("<|im_start|>system\nD<|im_end|>"), std::string::npos) << "a developer message is a system message: " << prompt;
}

TEST_F(Compat, ClaudeCodesRequestIsServedAndRecordedWithItsSystemEntryInPlace) {
  start("concat", {}, {{"max_completion_tokens", 8}});
  const std::string key = start_session("claude");
  const ordered_json cache = {{"type", "ephemeral"}};
  const ordered_json body = {
      {"model", "claude-sonnet-4-5"},
      {"system", {{{"type", "text"}, {"text", "You are Claude Code."}, {"cache_control", cache}}, {{"type", "text"}, {"text", "Be terse."}}}},
      {"messages", {{{"role", "user"}, {"content", {{{"type", "text"}, {"text", "<system-reminder>ctx</system-reminder>"}},
                                                   {{"type", "text"}, {"text", "List files."}, {"cache_control", cache}}}}},
                    {{"role", "system"}, {"content", {{{"type", "text"}, {"text", "Reminder: be safe."}, {"cache_control", cache}}}}}}},
      {"tools", {{{"name", "Bash"}, {"description", "Runs a command"}, {"input_schema", {{"type", "object"}, {"properties", {{"command", {{"type", "string"}}}}}}}},
                 {{"name", "Read"}, {"description", "Reads a file"}, {"input_schema", {{"type", "object"}}}, {"defer_loading", true}},
                 {{"type", "web_search_20250305"}, {"name", "web_search"}, {"max_uses", 5}}}},
      {"metadata", {{"user_id", "user_abc"}}},
      {"max_tokens", 32000},
      {"thinking", {{"type", "adaptive"}, {"display", "omitted"}}},
      {"context_management", {{"edits", {{{"type", "clear_thinking_20251015"}, {"keep", "all"}}}}}},
      {"output_config", {{"effort", "high"}}},
      {"stream", true}};
  const double cm_before = metric(ignored("anthropic", "context_management"));
  const double ws_before = metric(ignored("anthropic", "tools[].type=web_search_20250305"));
  auto [status, text] = request("POST", "/v1/messages?beta=true", body.dump(), {{"x-api-key", key}, {"anthropic-version", "2023-06-01"}});
  ASSERT_EQ(status, 200) << text;
  EXPECT_NE(text.find("event: message_stop"), std::string::npos) << text;
  EXPECT_EQ(metric(ignored("anthropic", "context_management")), cm_before + 1);
  EXPECT_EQ(metric(ignored("anthropic", "tools[].type=web_search_20250305")), ws_before + 1);
  uint64_t output_tokens = 0;
  for (const auto& event : sse_data(text))
    if (event["type"] == "message_delta") output_tokens = event["usage"]["output_tokens"];
  EXPECT_EQ(output_tokens, 8u) << "max_tokens 32000 is capped by gateway.max_completion_tokens";
  const auto exported = end_and_export(key, "claude-0");
  ASSERT_EQ(exported["rows"].size(), 1u);
  const auto [prompt, sampled] = split_row(exported["rows"][0]);
  const size_t sys = prompt.find("You are Claude Code.\nBe terse."), usr = prompt.find("List files."),
               reminder = prompt.find("<|im_start|>system\nReminder: be safe.<|im_end|>");
  ASSERT_NE(sys, std::string::npos) << prompt;
  ASSERT_NE(reminder, std::string::npos) << "the system entry is rendered in place: " << prompt;
  EXPECT_LT(sys, usr);
  EXPECT_LT(usr, reminder);
  EXPECT_NE(prompt.find("\"Bash\""), std::string::npos);
  EXPECT_EQ(prompt.find("web_search"), std::string::npos) << "server tools are not rendered";
  EXPECT_EQ(prompt.find("<think>"), std::string::npos) << "adaptive thinking at high effort leaves thinking on (no empty think block)";
}

// A tool call's arguments reach the template as the object they encode, as
// vLLM passes them: Qwen3's template prints an object with tojson (spaces
// after ':' and ',', as the model writes JSON) where the compact string a
// client echoes would print as it is; text that is no JSON object is {}.
TEST_F(Compat, ToolCallArgumentsReachTheTemplateAsObjects) {
  start("hf");
  const std::string key = start_session("arguments");
  auto call = [](const std::string& id, const std::string& arguments) {
    return ordered_json{{"id", id}, {"type", "function"}, {"function", {{"name", "get_weather"}, {"arguments", arguments}}}};
  };
  const ordered_json chat = {
      {"messages", {{{"role", "system"}, {"content", {{{"type", "text"}, {"text", "x-anthropic-billing-header: cc_version=2.1.330.f00; cc_entrypoint=sdk-cli;"}},
                                                      {{"type", "text"}, {"text", "Be exact."}}}}},
                    user("Weather in Paris and Rome?"),
                    {{"role", "assistant"}, {"content", nullptr}, {"tool_calls", {call("c1", "{\"city\":\"Paris\",\"days\":[1,2]}"), call("c2", "not json")}}},
                    {{"role", "tool"}, {"tool_call_id", "c1"}, {"content", "sunny"}},
                    {{"role", "tool"}, {"tool_call_id", "c2"}, {"content", "rain"}}}},
      {"tools", {kWeatherTool}}, {"max_tokens", 2}};
  const std::string rewrites = "areal_gateway_template_rewrites_total{kind=\"tool_arguments_not_an_object\"}";
  const std::string attribution = ignored("chat", "messages[].content.x-anthropic-billing-header");
  const double before = metric(rewrites), attribution_before = metric(attribution);
  auto [status, reply] = post("/v1/chat/completions", chat, key);
  ASSERT_EQ(status, 200) << reply.dump();
  EXPECT_EQ(metric(rewrites), before + 1) << "the unreadable arguments are counted";
  EXPECT_EQ(metric(attribution), attribution_before + 1) << "Claude Code's attribution line, through a gateway that speaks Chat";
  const ordered_json anthropic = {
      {"max_tokens", 2}, {"tools", {{{"name", "get_weather"}, {"input_schema", {{"type", "object"}}}}}},
      {"messages", {user("Weather in Oslo?"),
                    {{"role", "assistant"}, {"content", {{{"type", "tool_use"}, {"id", "t1"}, {"name", "get_weather"}, {"input", {{"city", "Oslo"}}}}}}},
                    {{"role", "user"}, {"content", {{{"type", "tool_result"}, {"tool_use_id", "t1"}, {"content", "snow"}}}}}}}};
  auto [astatus, atext] = request("POST", "/v1/messages", anthropic.dump(), {{"x-api-key", key}});
  ASSERT_EQ(astatus, 200) << atext;
  const auto exported = end_and_export(key, "arguments-0");
  ASSERT_EQ(exported["rows"].size(), 2u);
  const std::string chat_prompt = split_row(exported["rows"][0]).first, anthropic_prompt = split_row(exported["rows"][1]).first;
  EXPECT_NE(chat_prompt.find("{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": [1, 2]}}"), std::string::npos) << chat_prompt;
  EXPECT_NE(chat_prompt.find("{\"name\": \"get_weather\", \"arguments\": {}}"), std::string::npos) << chat_prompt;
  EXPECT_NE(chat_prompt.find("Be exact."), std::string::npos) << chat_prompt;
  EXPECT_EQ(chat_prompt.find("billing"), std::string::npos) << chat_prompt;
  EXPECT_NE(anthropic_prompt.find("{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}"), std::string::npos) << anthropic_prompt;
}

// A template shaped like Qwen3-Coder's and Qwen3.5's where these matter: it
// refuses a system message after the first, and iterates a call's arguments.
class StrictTemplate : public Compat {
 protected:
  void start_strict(const std::string& prompt_mode) {
    dir_ = areal::testing::test_temp_dir("strict-template");
    std::filesystem::create_directories(dir_);
    std::filesystem::copy_file(kQwen + "/tokenizer.json", dir_ + "/tokenizer.json", std::filesystem::copy_options::overwrite_existing);
    nlohmann::json config = nlohmann::json::parse(std::ifstream(kQwen + "/tokenizer_config.json"));
    config["chat_template"] =
        "{%- for message in messages %}"
        "{%- if message.role == 'system' and not loop.first %}{{ raise_exception('System message must be at the beginning.') }}{%- endif %}"
        "{{- '<|im_start|>' + message.role + '\\n' + message.content }}"
        "{%- for call in message.tool_calls or [] %}{{- '<tool_call>\\n<function=' + call.function.name + '>\\n' }}"
        "{%- for name, value in call.function.arguments|items %}{{- '<parameter=' + name + '>\\n' + value|string + '\\n</parameter>\\n' }}{%- endfor %}"
        "{{- '</function>\\n</tool_call>' }}{%- endfor %}"
        "{{- '<|im_end|>\\n' }}"
        "{%- endfor %}"
        "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}";
    std::ofstream(dir_ + "/tokenizer_config.json") << config.dump();
    start(prompt_mode, {}, {{"tokenizer", dir_}, {"reasoning_parser", "none"}, {"max_completion_tokens", 4}});
  }
  std::string dir_;
};

TEST_F(StrictTemplate, InlineSystemMessagesAreFoldedIntoTheFirstAndClaudeCodesAttributionLineDropped) {
  start_strict("hf");
  const std::string key = start_session("strict");
  const ordered_json claude = {
      {"max_tokens", 32000},
      {"system", {{{"type", "text"}, {"text", "x-anthropic-billing-header: cc_version=2.1.328.a1b; cc_entrypoint=sdk-cli;"}},
                  {{"type", "text"}, {"text", "You are Claude Code."}, {"cache_control", {{"type", "ephemeral"}}}}}},
      {"messages", {user("List files."), {{"role", "system"}, {"content", {{{"type", "text"}, {"text", "Reminder: be safe."}}}}}}}};
  const std::string folded = "areal_gateway_template_rewrites_total{kind=\"inline_system_folded\"}";
  const std::string attribution = ignored("anthropic", "system[].x-anthropic-billing-header");
  const double folded_before = metric(folded), attribution_before = metric(attribution);
  auto [status, text] = request("POST", "/v1/messages", claude.dump(), {{"x-api-key", key}});
  ASSERT_EQ(status, 200) << "the template's refusal is not the client's mistake: " << text;
  EXPECT_EQ(metric(folded), folded_before + 1);
  EXPECT_EQ(metric(attribution), attribution_before + 1);
  // Codex: two developer items, then the user's; a Chat call with a tool call in its history.
  auto text_part = [](const std::string& t) { return ordered_json::array({{{"type", "input_text"}, {"text", t}}}); };
  const ordered_json codex = {{"max_output_tokens", 4},
                              {"input", {{{"type", "message"}, {"role", "developer"}, {"content", text_part("You are Codex.")}},
                                         {{"type", "message"}, {"role", "developer"}, {"content", text_part("Sandbox: none.")}},
                                         {{"type", "message"}, {"role", "user"}, {"content", text_part("Say hi")}}}}};
  auto [cstatus, creply] = post("/v1/responses", codex, key);
  ASSERT_EQ(cstatus, 200) << creply.dump();
  const ordered_json chat = {
      {"max_tokens", 4},
      {"messages", {user("Read a.txt"),
                    {{"role", "assistant"}, {"content", ""},
                     {"tool_calls", {{{"id", "c1"}, {"type", "function"}, {"function", {{"name", "Read"}, {"arguments", "{\"path\": \"a.txt\"}"}}}}}}},
                    {{"role", "tool"}, {"tool_call_id", "c1"}, {"content", "hello"}}}}};
  auto [tstatus, treply] = post("/v1/chat/completions", chat, key);
  ASSERT_EQ(tstatus, 200) << "a string's |items was the template's error: " << treply.dump();
  const auto exported = end_and_export(key, "strict-0");
  ASSERT_EQ(exported["rows"].size(), 3u);
  const std::string claude_prompt = split_row(exported["rows"][0]).first;
  EXPECT_EQ(claude_prompt.rfind("<|im_start|>system\nYou are Claude Code.\nReminder: be safe.<|im_end|>\n<|im_start|>user\nList files.<|im_end|>", 0), 0u)
      << claude_prompt;
  EXPECT_EQ(claude_prompt.find("billing"), std::string::npos) << claude_prompt;
  EXPECT_EQ(split_row(exported["rows"][1]).first.rfind("<|im_start|>system\nYou are Codex.\nSandbox: none.<|im_end|>\n<|im_start|>user\nSay hi", 0), 0u);
  EXPECT_NE(split_row(exported["rows"][2]).first.find("<function=Read>\n<parameter=path>\na.txt\n</parameter>"), std::string::npos);
}

// In concat mode a turn extends its parent's exact tokens. A system text
// that arrives after the parent is folded into the first message, inside
// those tokens: the turn is rendered whole instead, so the text is not lost.
TEST_F(StrictTemplate, ASystemTextArrivingLaterIsNotLostToConcatLinking) {
  start_strict("concat");
  const std::string key = start_session("later");
  const ordered_json first = {{"messages", {{{"role", "system"}, {"content", "Be brief."}}, user("Hi")}}, {"max_tokens", 4}};
  auto [s1, r1] = post("/v1/chat/completions", first, key);
  ASSERT_EQ(s1, 200) << r1.dump();
  const std::string reply = r1["choices"][0]["message"]["content"];
  ordered_json same = first;  // the next turn, nothing new in the system: linked
  same["messages"].push_back({{"role", "assistant"}, {"content", reply}});
  same["messages"].push_back(user("And then?"));
  auto [s2, r2] = post("/v1/chat/completions", same, key);
  ASSERT_EQ(s2, 200) << r2.dump();
  ordered_json later = first;  // a system message after the parent's turn
  later["messages"].push_back({{"role", "assistant"}, {"content", reply}});
  later["messages"].push_back({{"role", "system"}, {"content", "Now answer in French."}});
  later["messages"].push_back(user("Again?"));
  auto [s3, r3] = post("/v1/chat/completions", later, key);
  ASSERT_EQ(s3, 200) << r3.dump();
  const auto exported = end_and_export(key, "later-0");
  std::string all;
  for (const auto& row : exported["rows"]) all += split_row(row).first + "\n---\n";
  EXPECT_NE(all.find("<|im_start|>system\nBe brief.\nNow answer in French.<|im_end|>"), std::string::npos) << all;
  EXPECT_NE(all.find("And then?"), std::string::npos) << all;
}

TEST_F(Compat, CodexsRequestIsServedAndRecordedThoughItSaysStoreFalse) {
  start("concat");
  const std::string key = start_session("codex");
  auto text_part = [](const std::string& t) { return ordered_json::array({{{"type", "input_text"}, {"text", t}}}); };
  const ordered_json body = {
      {"model", "gpt-5-codex"}, {"stream", true}, {"store", false}, {"include", {"reasoning.encrypted_content"}},
      {"reasoning", {{"summary", "auto"}}}, {"prompt_cache_key", "0199-abc"}, {"client_metadata", {{"originator", "codex_exec"}}},
      {"tool_choice", "auto"}, {"parallel_tool_calls", true}, {"max_output_tokens", 6},
      {"instructions", nullptr},
      {"input", {{{"type", "message"}, {"id", "msg_1"}, {"role", "developer"}, {"content", text_part("You are Codex.")}},
                 {{"type", "message"}, {"role", "developer"}, {"content", text_part("Sandbox: none.")}},
                 {{"type", "message"}, {"role", "user"}, {"content", text_part("Say hi")}}}},
      {"tools", {{{"type", "function"}, {"name", "exec_command"}, {"description", "Runs a command"}, {"strict", false},
                  {"parameters", {{"type", "object"}, {"properties", {{"cmd", {{"type", "string"}}}}}}}},
                 {{"type", "namespace"}, {"name", "multi_agent_v1"}, {"tools", ordered_json::array()}},
                 {{"type", "web_search"}}}}};
  const double include_before = metric(ignored("responses", "include"));
  const double ns_before = metric(ignored("responses", "tools[].type=namespace"));
  auto [status, text] = raw("/v1/responses", body.dump(), key);
  ASSERT_EQ(status, 200) << text;
  EXPECT_NE(text.find("\"type\":\"response.incomplete\""), std::string::npos) << "6 tokens end it: " << text;
  EXPECT_EQ(metric(ignored("responses", "include")), include_before + 1);
  EXPECT_EQ(metric(ignored("responses", "tools[].type=namespace")), ns_before + 1);
  const auto exported = end_and_export(key, "codex-0");
  ASSERT_EQ(exported["rows"].size(), 1u) << "store: false is OpenAI's storage flag, not 'do not train'";
  const auto [prompt, sampled] = split_row(exported["rows"][0]);
  EXPECT_NE(prompt.find("You are Codex."), std::string::npos);
  EXPECT_NE(prompt.find("\"exec_command\""), std::string::npos);
}

TEST_F(Compat, AForcedToolCallsOpeningIsPromptNotSampled) {
  start("hf", {"{\"city\": \"Paris\"}}\n</tool_call><|im_end|>", "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}\n</tool_call><|im_end|>",
               "{\"city\": \"Oslo\"}}\n</tool_call><|im_end|>"});
  const std::string key = start_session("forced");
  const ordered_json named = {{"messages", {user("Weather in Paris?")}}, {"tools", {kWeatherTool}}, {"max_tokens", 40},
                              {"tool_choice", {{"type", "function"}, {"function", {{"name", "get_weather"}}}}}};
  auto [s1, r1] = post("/v1/chat/completions", named, key);
  ASSERT_EQ(s1, 200) << r1.dump();
  ASSERT_EQ(r1["choices"][0]["message"]["tool_calls"].size(), 1u) << r1.dump();
  EXPECT_EQ(r1["choices"][0]["message"]["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(ordered_json::parse(r1["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"].get<std::string>()), (ordered_json{{"city", "Paris"}}));
  EXPECT_EQ(r1["choices"][0]["finish_reason"], "tool_calls");
  ordered_json required = named;
  required["tool_choice"] = "required";
  required["messages"] = {user("Weather in Rome?")};
  auto [s2, r2] = post("/v1/chat/completions", required, key);
  ASSERT_EQ(s2, 200) << r2.dump();
  ASSERT_EQ(r2["choices"][0]["message"]["tool_calls"].size(), 1u) << r2.dump();
  EXPECT_EQ(ordered_json::parse(r2["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"].get<std::string>()), (ordered_json{{"city", "Rome"}}));
  // Anthropic's named tool choice.
  const ordered_json anthropic = {{"max_tokens", 40}, {"messages", {user("Weather in Oslo?")}},
                                  {"tools", {{{"name", "get_weather"}, {"input_schema", kWeatherTool["function"]["parameters"]}}}},
                                  {"tool_choice", {{"type", "tool"}, {"name", "get_weather"}}}};
  auto [s3, r3] = post("/v1/messages", anthropic, key);
  ASSERT_EQ(s3, 200) << r3.dump();
  EXPECT_EQ(r3["stop_reason"], "tool_use");
  EXPECT_EQ(r3["content"].back()["input"], (ordered_json{{"city", "Oslo"}}));
  const auto exported = end_and_export(key, "forced-0");
  ASSERT_EQ(exported["rows"].size(), 3u);
  const std::vector<std::pair<std::string, std::string>> expected = {
      {"<tool_call>\n{\"name\": \"get_weather\", \"arguments\": ", "{\"city\": \"Paris\"}}\n</tool_call><|im_end|>"},
      {"<tool_call>\n", "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}\n</tool_call><|im_end|>"},
      {"<tool_call>\n{\"name\": \"get_weather\", \"arguments\": ", "{\"city\": \"Oslo\"}}\n</tool_call><|im_end|>"}};
  for (size_t i = 0; i < 3; ++i) {
    const auto [prompt, sampled] = split_row(exported["rows"][i]);
    const std::string& opening = expected[i].first;
    ASSERT_GE(prompt.size(), opening.size());
    EXPECT_EQ(prompt.substr(prompt.size() - opening.size()), opening) << "the forcing tokens end the prompt (mask 0)";
    EXPECT_EQ(sampled, expected[i].second) << "only what the model sampled has mask 1";
  }
  EXPECT_EQ(r1["usage"]["completion_tokens"].get<size_t>(), tok_->encode(expected[0].second, false).size());
}

TEST_F(Compat, SeveralChoicesAreEachRecorded) {
  start("hf");
  const std::string key = start_session("nchoices");
  auto [status, reply] = post("/v1/chat/completions", {{"messages", {user("Hi")}}, {"n", 3}, {"max_tokens", 3}}, key);
  ASSERT_EQ(status, 200) << reply.dump();
  ASSERT_EQ(reply["choices"].size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(reply["choices"][i]["index"], i);
  EXPECT_EQ(end_and_export(key, "nchoices-0")["rows"].size(), 3u);
}

TEST_F(Compat, PreviousResponseIdContinuesTheStoredResponsesExactTokens) {
  start("hf");  // even without concat mode: the client named the parent
  const std::string key = start_session("prev");
  auto [s1, r1] = post("/v1/responses", {{"input", "Hi"}, {"instructions", "Be brief."}, {"max_output_tokens", 5}}, key);
  ASSERT_EQ(s1, 200) << r1.dump();
  auto [s2, r2] = post("/v1/responses", {{"input", "More"}, {"instructions", "Be brief."}, {"previous_response_id", r1["id"]}, {"max_output_tokens", 5}}, key);
  ASSERT_EQ(s2, 200) << r2.dump();
  EXPECT_EQ(r2["previous_response_id"], r1["id"]);
  auto [s3, r3] = post("/v1/responses", {{"input", "x"}, {"previous_response_id", "resp_nope"}}, key);
  EXPECT_EQ(s3, 404) << r3.dump();
  EXPECT_EQ(r3["error"]["code"], "previous_response_not_found");
  auto [s4, r4] = post("/v1/responses", {{"input", "x"}, {"store", false}, {"max_output_tokens", 2}}, key);
  ASSERT_EQ(s4, 200);
  EXPECT_EQ(post("/v1/responses", {{"input", "y"}, {"previous_response_id", r4["id"]}}, key).first, 404) << "store: false keeps nothing to continue";
  auto [s5, r5] = post("/v1/responses", {{"input", "x"}, {"conversation", "conv_1"}}, key);
  EXPECT_EQ(s5, 404) << r5.dump();
  const auto exported = end_and_export(key, "prev-0");
  ASSERT_EQ(exported["rows"].size(), 3u);
  const auto first = exported["rows"][0]["input_ids"].get<std::vector<int32_t>>();
  const auto second = exported["rows"][1]["input_ids"].get<std::vector<int32_t>>();
  ASSERT_GT(second.size(), first.size());
  EXPECT_TRUE(std::equal(first.begin(), first.end(), second.begin())) << "turn 2 extends turn 1's prompt + sampled ids";
}

// Session-scoped base URLs (issue #27): the key in the URL is a credential;
// the id is not (ids are <task>-<n>), so the id form needs the session's key
// (or the admin's) in the request.
TEST_F(Compat, SessionUrlsActWithTheKeyInTheUrlOrTheIdAndItsKey) {
  start("hf");
  const std::string key = start_session("scoped");
  const std::string other = start_session("scoped");
  const std::string chat = ordered_json{{"messages", {user("Hi")}}, {"max_tokens", 2}}.dump();
  EXPECT_EQ(request("POST", "/scoped-0/v1/chat/completions", chat, {}).first, 401);
  EXPECT_EQ(request("POST", "/scoped-0/v1/chat/completions", chat, {{"Authorization", "Bearer " + other}}).first, 401);
  EXPECT_EQ(request("POST", "/scoped-0/rl/set_reward", ordered_json{{"reward", -1000}}.dump(), {}).first, 401);
  EXPECT_EQ(request("POST", "/scoped-0/rl/end_session", "{}", {{"x-api-key", other}}).first, 401);
  auto [s1, t1] = request("POST", "/scoped-0/v1/chat/completions", chat, {{"Authorization", "Bearer " + key}});
  EXPECT_EQ(s1, 200) << t1;
  auto [s2, t2] = request("POST", "/" + key + "/v1/messages", chat, {{"x-api-key", "sk-whatever-the-sdk-insists-on"}});
  EXPECT_EQ(s2, 200) << t2;
  auto [s3, t3] = request("POST", "/" + key + "/chat/completions", chat, {});
  EXPECT_EQ(s3, 200) << t3;
  auto [s4, t4] = request("POST", "/nobody-7/v1/chat/completions", chat, {});
  EXPECT_EQ(s4, 404) << t4;
  EXPECT_EQ(request("POST", "/" + key + "/rl/set_reward", ordered_json{{"reward", 0.5}}.dump(), {}).first, 200);
  EXPECT_EQ(request("POST", "/scoped-0/rl/end_session", "{}", {{"Authorization", "Bearer admin-k"}}).first, 200);
  auto [status, exported] = post("/export_trajectories", {{"session_id", "scoped-0"}}, "admin-k");
  ASSERT_EQ(status, 200);
  ASSERT_EQ(exported["rows"].size(), 3u);
  EXPECT_DOUBLE_EQ(exported["rows"][2]["reward"].get<double>(), 0.5);
}

TEST_F(Compat, CountTokensMatchesWhatTheCallUses) {
  start("hf");
  const ordered_json body = {{"system", "Be brief."}, {"messages", {user("How many tokens is this?")}},
                             {"tools", {{{"name", "Bash"}, {"input_schema", {{"type", "object"}}}}}}, {"thinking", {{"type", "disabled"}}}};
  auto [s1, counted] = post("/v1/messages/count_tokens", body, "admin-k");
  ASSERT_EQ(s1, 200) << counted.dump();
  ordered_json call = body;
  call["max_tokens"] = 2;
  auto [s2, served] = post("/v1/messages", call, "admin-k");
  ASSERT_EQ(s2, 200) << served.dump();
  EXPECT_EQ(counted["input_tokens"], served["usage"]["input_tokens"]);
  auto [s3, model] = request("GET", "/v1/models/claude-opus-4-1", "", {});
  ASSERT_EQ(s3, 200) << model;
  EXPECT_EQ(ordered_json::parse(model)["id"], "claude-opus-4-1");
}

TEST_F(Compat, StopSequenceIsReportedByName) {
  start("hf", {"Hello STOP world<|im_end|>"});
  auto [status, reply] = post("/v1/messages", {{"max_tokens", 20}, {"messages", {user("Hi")}}, {"stop_sequences", {"STOP", "NEVER"}}}, "admin-k");
  ASSERT_EQ(status, 200) << reply.dump();
  EXPECT_EQ(reply["stop_reason"], "stop_sequence");
  EXPECT_EQ(reply["stop_sequence"], "STOP");
  EXPECT_EQ(reply["content"][0]["text"], "Hello ");
}

}  // namespace

namespace {

TEST_F(Compat, OtherValidFormsAreServedAndWrongTypesAre400NotServerErrors) {
  start("hf");
  const ordered_json fn = {{"type", "function"}, {"name", "f"}, {"description", nullptr}, {"parameters", nullptr}};
  const std::vector<std::pair<std::string, ordered_json>> valid = {
      {"/v1/responses", {{"input", "x"}, {"max_output_tokens", 2}, {"tools", {fn}}, {"tool_choice", {{"type", "allowed_tools"}, {"mode", "auto"}, {"tools", {{{"type", "function"}, {"name", "f"}}}}}}}},
      {"/v1/responses", {{"input", "x"}, {"max_output_tokens", 2}, {"tools", {fn, {{"type", "web_search_preview"}}}}, {"tool_choice", {{"type", "web_search_preview"}}}}},
      {"/v1/messages", {{"max_tokens", 2}, {"messages", {user("x")}}, {"tools", {{{"type", "bash_20250124"}, {"name", "bash"}}}}, {"tool_choice", {{"type", "tool"}, {"name", "bash"}}}}},
      {"/v1/chat/completions", {{"messages", {user("x")}}, {"max_tokens", 2}, {"n", 2}, {"seed", 7}}},
  };
  for (const auto& [path, body] : valid) {
    auto [status, reply] = post(path, body, "admin-k");
    EXPECT_EQ(status, 200) << path << " " << body.dump() << " -> " << reply.dump();
  }
  auto [s, two] = post("/v1/chat/completions", {{"messages", {user("x")}}, {"max_tokens", 6}, {"n", 2}, {"seed", 7}}, "admin-k");
  ASSERT_EQ(s, 200);
  EXPECT_NE(two["choices"][0]["message"]["content"], two["choices"][1]["message"]["content"]) << "choice i samples with seed + i";
  const std::vector<std::pair<std::string, ordered_json>> malformed = {
      {"/v1/chat/completions", {{"messages", {user("x")}}, {"stream", true}, {"stream_options", {{"include_usage", "yes"}}}}},
      {"/v1/chat/completions", {{"messages", {user("x")}}, {"tool_choice", {{"type", 3}}}}},
      {"/v1/messages", {{"max_tokens", 2}, {"messages", {user("x")}}, {"thinking", {{"type", 5}}}}},
      {"/v1/responses", {{"input", {{{"type", "reasoning"}, {"summary", {"not an object"}}}}}}},
      {"/v1/responses", {{"input", "x"}, {"tools", {{{"type", 9}}}}}},
  };
  for (const auto& [path, body] : malformed) {
    auto [status, reply] = post(path, body, "admin-k");
    EXPECT_EQ(status, 400) << path << " " << body.dump() << " -> " << reply.dump();
  }
}

TEST_F(Compat, AnEndedSessionsUrlIsGoneEvenAfterItsKeyWasReused) {
  start("hf");
  auto [s1, first] = post("/rl/start_session", {{"task_id", "refresh"}, {"api_key", "sk-fixed-key-123"}}, "admin-k");
  ASSERT_EQ(s1, 200);
  auto [s2, second] = post("/rl/start_session", {{"task_id", "refresh"}, {"api_key", "sk-fixed-key-123"}}, "admin-k");
  ASSERT_EQ(s2, 200);
  ASSERT_NE(first["session_id"], second["session_id"]);
  const std::string body = ordered_json{{"messages", {user("Hi")}}, {"max_tokens", 2}}.dump();
  const std::map<std::string, std::string> key = {{"Authorization", "Bearer sk-fixed-key-123"}};
  EXPECT_EQ(request("POST", "/" + first["session_id"].get<std::string>() + "/v1/chat/completions", body, key).first, 410);
  EXPECT_EQ(request("POST", "/" + second["session_id"].get<std::string>() + "/v1/chat/completions", body, key).first, 200);
}

}  // namespace

// A body with bytes that are not UTF-8 is a client mistake: a 400 in each
// API's own error shape naming the byte, never a closed connection (issue
// #17's report), and nothing is recorded.
TEST_F(Compat, BodiesThatAreNotUtf8AreA400NamingTheByte) {
  start("hf");
  const std::string key = start_session("utf8");
  const std::string chat = std::string(R"({"messages": [{"role": "user", "content": "hi )") + "\xff\xfe" + R"( there"}], "max_tokens": 4})";
  for (const char* path : {"/v1/chat/completions", "/v1/responses", "/v1/messages"}) {
    const std::string body = std::string(path) == "/v1/responses" ? std::string(R"({"input": "a )") + "\xc3\x28" + R"("})" : chat;
    auto [status, text] = raw(path, body, key);
    EXPECT_EQ(status, 400) << path;
    const auto j = nlohmann::json::parse(text);  // the error body itself is valid JSON
    EXPECT_NE(j["error"]["message"].get<std::string>().find("not valid UTF-8 (byte "), std::string::npos) << text;
    if (std::string(path) == "/v1/messages") {
      EXPECT_EQ(j["type"], "error");  // Anthropic's shape
    }
  }
  // Overlong forms and surrogates are not UTF-8 either; valid multi-byte text is served.
  EXPECT_EQ(raw("/v1/chat/completions", std::string(R"({"messages": [{"role": "user", "content": ")") + "\xe0\x80\x80" + R"("}]})", key).first, 400);
  EXPECT_EQ(raw("/v1/chat/completions", std::string(R"({"messages": [{"role": "user", "content": ")") + "\xed\xa0\x80" + R"("}]})", key).first, 400);
  EXPECT_EQ(raw("/v1/chat/completions", R"({"messages": [{"role": "user", "content": "h\u00e9 \u4f60\u597d \ud83d\ude00"}], "max_tokens": 2})", key).first, 200);
  EXPECT_EQ(raw("/v1/chat/completions", std::string(R"({"messages": [{"role": "user", "content": ")") + "h\xc3\xa9 \xe4\xbd\xa0 \xf0\x9f\x98\x80" + R"("}], "max_tokens": 2})", key).first, 200);
}

// What docs/http-api.md promises to refuse is refused, in each API's own
// error shape and naming the field: a content part type no schema has, tool
// parameters that are not an object, a forced tool choice with no tools, a
// response format type no API has. The valid neighbours of each stay 200.
TEST_F(Compat, MalformedPartsToolsChoicesAndFormatsAre400NamingTheField) {
  start("hf");
  const ordered_json bogus_part = ordered_json::array({{{"type", "bogus"}, {"text", "x"}}});
  const std::vector<std::tuple<std::string, ordered_json, std::string>> malformed = {
      {"/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", bogus_part}}}}}, "'messages[0].content[0].type': unknown content part type 'bogus'"},
      {"/v1/chat/completions", {{"messages", {user("x")}}, {"tools", {{{"type", "function"}, {"function", {{"name", "f"}, {"parameters", "x"}}}}}}},
       "'tools[0].function.parameters': must be an object"},
      {"/v1/chat/completions", {{"messages", {user("x")}}, {"tool_choice", "required"}}, "'tool_choice': is 'required' but the request has no 'tools'"},
      {"/v1/chat/completions", {{"messages", {user("x")}}, {"response_format", {{"type", "bogus"}}}}, "'response_format.type': must be text, json_object or json_schema"},
      {"/v1/responses", {{"input", {{{"role", "user"}, {"content", bogus_part}}}}}, "'input[0].content[0].type': unknown content part type 'bogus'"},
      {"/v1/responses", {{"input", "x"}, {"tools", {{{"type", "function"}, {"name", "f"}, {"parameters", "x"}}}}}, "'tools[0].parameters': must be an object"},
      {"/v1/responses", {{"input", "x"}, {"tool_choice", "required"}}, "'tool_choice': is 'required' but the request has no 'tools'"},
      {"/v1/responses", {{"input", "x"}, {"text", {{"format", {{"type", "bogus"}}}}}}, "'text.format.type': must be text, json_object or json_schema"},
      {"/v1/messages", {{"max_tokens", 2}, {"messages", {{{"role", "user"}, {"content", bogus_part}}}}}, "messages.0.content.0.type: unknown content block type 'bogus'"},
      {"/v1/messages", {{"max_tokens", 2}, {"messages", {user("x")}}, {"system", bogus_part}}, "system.0.type: unknown content block type 'bogus'"},
      {"/v1/messages", {{"max_tokens", 2}, {"messages", {user("x")}}, {"tools", {{{"name", "f"}, {"input_schema", "x"}}}}}, "tools.0.input_schema: must be an object"},
      {"/v1/messages", {{"max_tokens", 2}, {"messages", {user("x")}}, {"tool_choice", {{"type", "any"}}}}, "tool_choice.type: is 'any' but the request has no 'tools'"},
      {"/v1/messages", {{"max_tokens", 2}, {"messages", {user("x")}}, {"output_config", {{"format", {{"type", "bogus"}}}}}},
       "'output_config.format.type': must be text, json_object or json_schema"},
  };
  for (const auto& [path, body, message] : malformed) {
    auto [status, reply] = post(path, body, "admin-k");
    EXPECT_EQ(status, 400) << path << " " << body.dump() << " -> " << reply.dump();
    if (path == "/v1/messages") {
      EXPECT_EQ(reply["type"], "error") << "Anthropic's error shape: " << reply.dump();
      EXPECT_EQ(reply["error"]["type"], "invalid_request_error") << reply.dump();
    }
    EXPECT_NE(reply["error"]["message"].get<std::string>().find(message), std::string::npos) << path << " -> " << reply.dump();
  }
  const ordered_json custom_tool = {{"type", "custom"}, {"custom", {{"name", "grep"}}}};
  const std::vector<std::pair<std::string, ordered_json>> valid = {
      // A forced choice with only tools we do not render forces nothing.
      {"/v1/chat/completions", {{"messages", {user("x")}}, {"max_tokens", 2}, {"tools", {custom_tool}}, {"tool_choice", "required"}}},
      {"/v1/responses", {{"input", "x"}, {"max_output_tokens", 2}, {"tools", {{{"type", "web_search"}}}}, {"tool_choice", "required"}}},
      {"/v1/messages", {{"max_tokens", 2}, {"messages", {user("x")}}, {"tools", {{{"type", "web_search_20250305"}, {"name", "web_search"}}}}, {"tool_choice", {{"type", "any"}}}}},
      {"/v1/chat/completions", {{"messages", {user("x")}}, {"max_tokens", 2}, {"tool_choice", "auto"}}},
      {"/v1/chat/completions", {{"messages", {user("x")}}, {"max_tokens", 2}, {"response_format", {{"type", "text"}}}}},
      {"/v1/chat/completions", {{"messages", {user("x")}}, {"max_tokens", 2}, {"tools", {{{"type", "function"}, {"function", {{"name", "f"}, {"parameters", nullptr}}}}}}}},
      // Media parts of every API and vLLM's extensions, Anthropic's server-tool blocks: dropped and counted.
      {"/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", {{{"type", "input_audio"}, {"input_audio", {{"data", "AA"}, {"format", "wav"}}}},
                                                                              {{"type", "video_url"}, {"video_url", {{"url", "v"}}}},
                                                                              {{"type", "file"}, {"file", {{"file_id", "f"}}}}, {{"type", "text"}, {"text", "x"}}}}}}},
                                {"max_tokens", 2}}},
      {"/v1/responses", {{"input", {{{"role", "user"}, {"content", {{{"type", "input_image"}, {"image_url", "u"}}, {{"type", "input_file"}, {"file_id", "f"}},
                                                                    {{"type", "input_text"}, {"text", "x"}}}}}}},
                         {"max_output_tokens", 2}}},
      {"/v1/messages", {{"max_tokens", 2},
                        {"messages", {user("search"),
                                      {{"role", "assistant"}, {"content", {{{"type", "server_tool_use"}, {"id", "srvtoolu_1"}, {"name", "web_search"}, {"input", ordered_json::object()}},
                                                                           {{"type", "web_search_tool_result"}, {"tool_use_id", "srvtoolu_1"}, {"content", ordered_json::array()}},
                                                                           {{"type", "text"}, {"text", "found"}}}}},
                                      user("thanks")}}}},
  };
  for (const auto& [path, body] : valid) {
    auto [status, reply] = post(path, body, "admin-k");
    EXPECT_EQ(status, 200) << path << " " << body.dump() << " -> " << reply.dump();
  }
  // Both budget names (the deprecated one beside the new): the new one counts, as at vLLM.
  // top_p 0, OpenAI's lower bound: the most likely token only.
  auto [both, both_reply] = post("/v1/chat/completions", {{"messages", {user("x")}}, {"max_tokens", 9}, {"max_completion_tokens", 2}, {"top_p", 0}}, "admin-k");
  ASSERT_EQ(both, 200) << both_reply.dump();
  EXPECT_EQ(both_reply["usage"]["completion_tokens"], 2) << both_reply.dump();
}

// Nested fields are counted by path (docs/http-api.md: honoured, ignored or
// unknown), once per request, at the fixed places the parsers read; what is
// inside a tool's schema is never walked.
TEST_F(Compat, NestedFieldsAreCountedByPath) {
  start("hf");
  const ordered_json cache = {{"type", "ephemeral"}};
  struct Expect {
    std::string metric;
    double before;
  };
  std::vector<Expect> expected;
  auto expect = [&](const std::string& name) { expected.push_back({name, metric(name)}); };
  expect(ignored("chat", "tools[].function.strict"));
  expect(ignored("chat", "messages[].content[].cache_control"));
  expect(unknown("chat", "tools[].function.x_fn_field"));
  expect(unknown("chat", "tools[].x_tool_field"));
  expect(unknown("chat", "messages[].content[].x_part_field"));
  expect(ignored("responses", "tools[].strict"));
  expect(ignored("responses", "input[].content[].annotations"));
  expect(unknown("responses", "tools[].x_tool_field"));
  expect(ignored("anthropic", "messages[].content[].cache_control"));
  expect(ignored("anthropic", "system[].cache_control"));
  expect(ignored("anthropic", "tools[].cache_control"));
  expect(ignored("anthropic", "messages[].content[].signature"));
  expect(unknown("anthropic", "tools[].x_tool_field"));
  const double schema_before = metric(unknown("chat", "tools[].function.parameters.x_deep"));
  const ordered_json schema = {{"type", "object"}, {"x_deep", 1}, {"properties", {{"a", {{"type", "string"}, {"x_deeper", 2}}}}}};
  const ordered_json chat = {
      {"messages", {{{"role", "user"}, {"content", {{{"type", "text"}, {"text", "a"}, {"cache_control", cache}},
                                                    {{"type", "text"}, {"text", "b"}, {"cache_control", cache}, {"x_part_field", 1}}}}}}},
      {"tools", {{{"type", "function"}, {"x_tool_field", 1},
                  {"function", {{"name", "f"}, {"parameters", schema}, {"strict", true}, {"x_fn_field", 1}}}}}},
      {"max_tokens", 2}};
  EXPECT_EQ(post("/v1/chat/completions", chat, "admin-k").first, 200);
  const ordered_json responses = {
      {"input", {user("hi"), {{"type", "message"}, {"role", "assistant"},
                               {"content", {{{"type", "output_text"}, {"text", "hello"}, {"annotations", ordered_json::array()}}}}},
                 user("again")}},
      {"tools", {{{"type", "function"}, {"name", "f"}, {"parameters", schema}, {"strict", true}, {"x_tool_field", 1}}}},
      {"max_output_tokens", 2}};
  EXPECT_EQ(post("/v1/responses", responses, "admin-k").first, 200);
  const ordered_json anthropic = {
      {"system", {{{"type", "text"}, {"text", "S"}, {"cache_control", cache}}}},
      {"messages", {{{"role", "user"}, {"content", {{{"type", "text"}, {"text", "hi"}, {"cache_control", cache}}}}},
                    {{"role", "assistant"}, {"content", {{{"type", "thinking"}, {"thinking", "t"}, {"signature", "sig"}}, {{"type", "text"}, {"text", "hello"}}}}},
                    user("again")}},
      {"tools", {{{"name", "f"}, {"input_schema", schema}, {"cache_control", cache}, {"x_tool_field", 1}}}},
      {"max_tokens", 2}};
  EXPECT_EQ(post("/v1/messages", anthropic, "admin-k").first, 200);
  for (const auto& e : expected) EXPECT_EQ(metric(e.metric), e.before + 1) << e.metric << ": once per request";
  EXPECT_EQ(metric(unknown("chat", "tools[].function.parameters.x_deep")), schema_before) << "a tool's schema is the client's own";
}

// What real agent programs send (issue #28, point 7): pi-coding-agent's Chat
// calls carry `store: false` (OpenAI's "do not keep it at OpenAI") and must
// still be recorded; opencode's Anthropic provider posts to /messages
// without /v1, as OpenAI clients post to /chat/completions.
TEST_F(Compat, StoreFalseIsRecordedAndMessagesWorkWithoutV1) {
  start("hf");
  const std::string key = start_session("agents");
  auto [s1, chat] = post("/v1/chat/completions", {{"messages", {user("Hi")}}, {"max_tokens", 2}, {"store", false}}, key);
  ASSERT_EQ(s1, 200) << chat.dump();
  auto [s2, message] = post("/messages", {{"messages", {user("Hi")}}, {"max_tokens", 2}}, key);
  ASSERT_EQ(s2, 200) << message.dump();
  EXPECT_EQ(message["type"], "message");
  auto [s3, counted] = post("/messages/count_tokens", {{"messages", {user("Hi")}}}, key);
  ASSERT_EQ(s3, 200) << counted.dump();
  EXPECT_GT(counted["input_tokens"].get<int>(), 0);
  auto [s4, bad] = post("/messages", {{"messages", {user("Hi")}}, {"max_tokens", "x"}}, key);
  EXPECT_EQ(s4, 400);
  EXPECT_EQ(bad["type"], "error") << bad.dump();  // Anthropic's error shape on this route too
  auto [s5, wrong] = post("/v1/chat/completions", {{"messages", {user("Hi")}}, {"store", "no"}}, key);
  EXPECT_EQ(s5, 400) << wrong.dump();
  const auto exported = end_and_export(key, "agents-0");
  ASSERT_EQ(exported["rows"].size(), 2u) << exported.dump();
  EXPECT_EQ(exported["rows"][0]["interaction_id"], chat["id"]);
  EXPECT_EQ(exported["rows"][1]["interaction_id"], message["id"]);
}

// A template whose generation prompt opens <think> by default and writes a
// closed <think></think> when thinking is off (Qwen3.5's way; here Qwen3's
// template with that one change). reasoning_parser auto is then deepseek_r1
// for requests that think, and qwen3 for those that turn thinking off: their
// reply starts outside a think block, so a tool call in it is a tool call
// (it used to be read as reasoning: no call, and the agent's loop stopped).
class OpensThinkTemplate : public Compat {
 protected:
  void SetUp() override {
    dir_ = areal::testing::test_temp_dir("opens-think-template");
    std::filesystem::create_directories(dir_);
    std::filesystem::copy_file(kQwen + "/tokenizer.json", dir_ + "/tokenizer.json", std::filesystem::copy_options::overwrite_existing);
    nlohmann::json config = nlohmann::json::parse(std::ifstream(kQwen + "/tokenizer_config.json"));
    std::string t = config["chat_template"];
    const std::string closed = "        {{- '<think>\\n\\n</think>\\n\\n' }}\n    {%- endif %}\n{%- endif %}";
    ASSERT_NE(t.find(closed), std::string::npos) << "Qwen3's template changed: this test edits its generation prompt";
    t.replace(t.find(closed), closed.size(),
              "        {{- '<think>\\n\\n</think>\\n\\n' }}\n    {%- else %}\n        {{- '<think>\\n' }}\n    {%- endif %}\n{%- endif %}");
    config["chat_template"] = t;
    std::ofstream(dir_ + "/tokenizer_config.json") << config.dump();
  }
  std::string dir_;
};

TEST_F(OpensThinkTemplate, ARequestThatTurnsThinkingOffGetsItsToolCallParsed) {
  const std::string call = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
  start("hf", {"Still weighing it", call, call, call}, {{"tokenizer", dir_}, {"reasoning_parser", "auto"}});
  const std::string key = start_session("think");
  const ordered_json tools = {{{"type", "function"},
                               {"function", {{"name", "get_weather"}, {"parameters", {{"type", "object"}, {"properties", {{"city", {{"type", "string"}}}}}}}}}}};
  // Thinking on (the default): the prompt opened <think>, so a reply that
  // has not closed it yet is all reasoning (deepseek_r1 was chosen).
  auto [s1, r1] = post("/v1/chat/completions", {{"messages", {user("Hi")}}, {"max_tokens", 20}}, key);
  ASSERT_EQ(s1, 200) << r1.dump();
  ASSERT_TRUE(r1["choices"][0]["message"].contains("reasoning_content")) << "the template must open <think> for this test: " << r1.dump();
  EXPECT_EQ(r1["choices"][0]["message"]["reasoning_content"], "Still weighing it") << r1.dump();
  // Thinking off, unstreamed and streamed: the reply is a tool call.
  const ordered_json off = {{"messages", {user("Weather in Paris?")}}, {"max_tokens", 40}, {"tools", tools},
                            {"chat_template_kwargs", {{"enable_thinking", false}}}};
  auto [s2, r2] = post("/v1/chat/completions", off, key);
  ASSERT_EQ(s2, 200) << r2.dump();
  ASSERT_TRUE(r2["choices"][0]["message"].contains("tool_calls")) << r2.dump();
  EXPECT_EQ(r2["choices"][0]["message"]["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(r2["choices"][0]["finish_reason"], "tool_calls");
  EXPECT_FALSE(r2["choices"][0]["message"].contains("reasoning_content")) << r2.dump();
  ordered_json streamed = off;
  streamed["stream"] = true;
  auto [s3, text] = raw("/v1/chat/completions", streamed.dump(), key);
  ASSERT_EQ(s3, 200) << text;
  std::string name, reasoning;
  for (const auto& chunk : sse_data(text)) {
    const auto& delta = chunk["choices"][0]["delta"];
    if (delta.contains("tool_calls")) name = delta["tool_calls"][0]["function"]["name"];
    if (delta.contains("reasoning_content")) reasoning += delta["reasoning_content"].get<std::string>();
  }
  EXPECT_EQ(name, "get_weather") << text;
  EXPECT_EQ(reasoning, "") << text;
  // Anthropic's thinking disabled: a tool_use block.
  const ordered_json message = {{"model", "m"}, {"max_tokens", 40}, {"thinking", {{"type", "disabled"}}},
                                {"tools", {{{"name", "get_weather"}, {"input_schema", {{"type", "object"}, {"properties", {{"city", {{"type", "string"}}}}}}}}}},
                                {"messages", {user("Weather in Paris?")}}};
  auto [s4, r4] = request("POST", "/v1/messages", message.dump(), {{"x-api-key", key}});
  ASSERT_EQ(s4, 200) << r4;
  const auto m = ordered_json::parse(r4);
  EXPECT_EQ(m["stop_reason"], "tool_use") << r4;
}
