// /chat/completions over real HTTP on loopback with the real Qwen3 tokenizer
// and chat template, the mock backend generating: validation, streaming,
// token-exact recording and concat export of a multi-turn tool conversation.
#include <unistd.h>
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>
#include <map>
#include <algorithm>
#include <sstream>
#include <ostream>

#include "gateway_fixture.hpp"

using nlohmann::ordered_json;

namespace {

class Chat : public GatewayFixture {
 protected:
  // The id a client reads from a reply: the JSON body's `id`, or from a
  // stream the first event that names the response (chunk, message_start,
  // response.created).
  static std::string id_of(const std::string& path, bool stream, const std::string& text) {
    if (!stream) return ordered_json::parse(text)["id"];
    for (const auto& event : sse_data(text)) {
      if (path == "/v1/chat/completions") return event["id"];
      if (event.value("type", "") == "message_start") return event["message"]["id"];
      if (event.value("type", "") == "response.created") return event["response"]["id"];
    }
    return "";
  }
};

}  // namespace

TEST_F(Chat, ClientMistakesAre400WithTheParameterNamed) {
  start("hf");
  const std::string key = start_session("t");
  const std::vector<std::pair<ordered_json, std::string>> cases = {
      {{{"messages", ordered_json::array()}}, "'messages': must be a non-empty array"},
      {{{"messages", {user("x")}}, {"n", 0}}, "'n': must be between"},
      {{{"messages", {user("x")}}, {"temperature", 3}}, "'temperature': must be between 0 and 2"},
      {{{"messages", {user("x")}}, {"top_p", -0.5}}, "'top_p': must be between 0 and 1"},
      {{{"messages", {{{"role", "wizard"}, {"content", "x"}}}}}, "'messages[0].role'"},
      {{{"messages", {{{"role", "user"}, {"content", 7}}}}}, "'messages[0].content': must be a string or an array"},
      {{{"messages", {user("x")}}, {"tool_choice", {{"type", "function"}, {"function", {{"name", "g"}}}}}, {"tools", {{{"type", "function"}, {"function", {{"name", "f"}}}}}}},
       "names function 'g', which is not in 'tools'"},
      {{{"messages", {user("x")}}, {"tool_choice", "sometimes"}}, "'tool_choice'"},
      {{{"messages", {user([] {
          std::string s;
          for (int i = 0; i < 5000; ++i) s += " x";  // one token each: 5000 > 4096
          return s;
        }())}}}, "leaves no room in the context of 4096"},
  };
  for (const auto& [body, message] : cases) {
    auto [status, reply] = post("/v1/chat/completions", body, key);
    EXPECT_EQ(status, 400) << body.dump();
    EXPECT_NE(reply["error"]["message"].get<std::string>().find(message), std::string::npos) << reply.dump();
  }
}

TEST_F(Chat, StreamingDeliversTheSameTextAsNonStreaming) {
  start("hf");
  const ordered_json base = {{"messages", {user("Say something")}}, {"max_tokens", 12}, {"seed", 42}, {"temperature", 1.0}};
  auto [status, whole] = post("/chat/completions", base, "admin-k");
  ASSERT_EQ(status, 200) << whole.dump();
  ordered_json streaming = base;
  streaming["stream"] = true;
  auto [sstatus, text] = raw("/chat/completions", streaming.dump(), "admin-k");
  ASSERT_EQ(sstatus, 200);
  std::string content, finish;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("data: ", 0) != 0 || line == "data: [DONE]") continue;
    const auto chunk = ordered_json::parse(line.substr(6));
    ASSERT_EQ(chunk["object"], "chat.completion.chunk");
    const auto& delta = chunk["choices"][0]["delta"];
    if (delta.contains("content")) content += delta["content"].get<std::string>();
    if (!chunk["choices"][0]["finish_reason"].is_null()) finish = chunk["choices"][0]["finish_reason"];
  }
  EXPECT_NE(text.find("data: [DONE]"), std::string::npos);
  EXPECT_EQ(content, whole["choices"][0]["message"]["content"].get<std::string>());
  EXPECT_EQ(finish, whole["choices"][0]["finish_reason"]);
  EXPECT_EQ(whole["usage"]["completion_tokens"], 12);
}

TEST_F(Chat, ConcatExportOfAToolConversationIsOneRowMatchingWhatTheClientSaw) {
  start("concat");
  const std::string key = start_session("tooltask");
  const ordered_json tools = {{{"type", "function"}, {"function", {{"name", "add"}, {"parameters", {{"type", "object"}}}}}}};
  ordered_json messages = {{{"role", "system"}, {"content", "Use tools."}}, user("What is 2+3?")};
  std::vector<std::string> seen;  // what the client saw, in order
  for (int turn = 0; turn < 3; ++turn) {
    auto [status, reply] = post("/v1/chat/completions", {{"messages", messages}, {"tools", tools}, {"max_tokens", 6}, {"seed", turn}, {"logprobs", true}}, key);
    ASSERT_EQ(status, 200) << reply.dump();
    const auto& message = reply["choices"][0]["message"];
    seen.push_back(message["content"]);
    // logprobs returned to the client are the recorded ones.
    EXPECT_EQ(reply["choices"][0]["logprobs"]["content"].size(), reply["usage"]["completion_tokens"].get<size_t>());
    messages.push_back(message);  // the agent echoes the reply...
    messages.push_back({{"role", "tool"}, {"tool_call_id", "call_" + std::to_string(turn)}, {"content", std::to_string(turn)}});  // ...and a tool result
  }
  ASSERT_EQ(post("/rl/set_reward", {{"reward", 1.0}}, key).first, 200);
  ASSERT_EQ(post("/rl/end_session", ordered_json::object(), key).first, 200);
  auto [status, exported] = post("/export_trajectories", {{"session_id", "tooltask-0"}, {"style", "concat"}}, "admin-k");
  ASSERT_EQ(status, 200) << exported.dump();
  ASSERT_EQ(exported["rows"].size(), 1u) << "a multi-turn conversation exports as one row";
  const auto& row = exported["rows"][0];
  EXPECT_EQ(row["turns"], 3);
  EXPECT_DOUBLE_EQ(row["reward"].get<double>(), 1.0);
  // Decode each trained span: it must be exactly what the client saw.
  const auto ids = row["input_ids"].get<std::vector<int32_t>>();
  const auto mask = row["loss_mask"].get<std::vector<int32_t>>();
  const auto versions = row["versions"].get<std::vector<int64_t>>();
  std::vector<std::string> trained;
  std::vector<int32_t> span;
  for (size_t i = 0; i <= ids.size(); ++i) {
    if (i < ids.size() && mask[i]) {
      span.push_back(ids[i]);
      EXPECT_EQ(versions[i], 0);
    } else if (!span.empty()) {
      trained.push_back(tok_->decode(span));
      span.clear();
    }
    if (i < ids.size() && !mask[i]) {
      EXPECT_EQ(versions[i], -1);
    }
  }
  ASSERT_EQ(trained.size(), 3u);
  for (size_t t = 0; t < 3; ++t) EXPECT_EQ(trained[t], seen[t]) << "turn " << t;
}

TEST_F(Chat, AnInteractionIsRecordedEvenIfTheClientLeavesMidStream) {
  start("hf");
  const std::string key = start_session("gone");
  {
    Poco::URI uri(url_);
    Poco::Net::HTTPClientSession s(uri.getHost(), uri.getPort());
    Poco::Net::HTTPRequest req("POST", "/chat/completions", Poco::Net::HTTPMessage::HTTP_1_1);
    req.set("Authorization", "Bearer " + key);
    req.setContentType("application/json");
    const std::string body = ordered_json{{"messages", {user("long answer please")}}, {"max_tokens", 64}, {"stream", true}}.dump();
    req.setContentLength(static_cast<std::streamsize>(body.size()));
    s.sendRequest(req) << body;
    Poco::Net::HTTPResponse res;
    std::istream& in = s.receiveResponse(res);
    char first[64];
    in.read(first, sizeof first);  // read a little, then hang up
    s.reset();
  }
  // The record completes server-side: end the session and find the call in the export.
  for (int attempt = 0; attempt < 100; ++attempt) {
    auto [status, exported] = [&] {
      post("/rl/end_session", ordered_json::object(), key);
      return post("/export_trajectories", {{"session_id", "gone-0"}}, "admin-k");
    }();
    if (status == 200 && exported["rows"].size() == 1) {
      EXPECT_EQ(exported["rows"][0]["loss_mask"].get<std::vector<int>>().back(), 1);
      return;
    }
    if (status == 200) {
      EXPECT_EQ(exported["skipped_incomplete"], 1) << "an in-flight call is reported, never silently lost";
      return;
    }
    usleep(20000);
  }
  FAIL() << "the session could not be exported";
}

// The id the client receives is the id that rewards it: for each API,
// streamed or not, set_reward with the reply's id answers 200 and the export
// carries that reward on a row with that interaction_id.
TEST_F(Chat, TheIdTheClientReceivesIsTheIdThatRewardsIt) {
  start("hf");
  const std::string key = start_session("ids");
  std::map<std::string, double> rewarded;  // interaction id -> reward
  int n = 0;
  for (const std::string path : {"/v1/chat/completions", "/v1/messages", "/v1/responses"}) {
    for (const bool stream : {false, true}) {
      const std::string text = "question " + std::to_string(n);  // distinct: every call is a root of its own
      ordered_json body = path == "/v1/responses" ? ordered_json{{"input", text}, {"max_output_tokens", 3}}
                                                  : ordered_json{{"messages", {user(text)}}, {"max_tokens", 3}};
      body["stream"] = stream;
      auto [status, reply] = raw(path, body.dump(), key);
      ASSERT_EQ(status, 200) << path << " " << reply;
      const std::string id = id_of(path, stream, reply);
      ASSERT_FALSE(id.empty()) << path << " " << reply;
      const double reward = 0.125 * ++n;
      auto [rs, rr] = post("/rl/set_reward", {{"interaction_id", id}, {"reward", reward}}, key);
      EXPECT_EQ(rs, 200) << path << (stream ? " (stream) " : " ") << id << ": " << rr.dump();
      rewarded[id] = reward;
    }
  }
  const auto exported = end_and_export(key, "ids-0");
  ASSERT_EQ(exported["rows"].size(), rewarded.size());
  for (const auto& row : exported["rows"]) {
    const std::string id = row["interaction_id"];
    ASSERT_TRUE(rewarded.count(id)) << "exported under an id no client saw: " << id;
    EXPECT_DOUBLE_EQ(row["reward"].get<double>(), rewarded[id]) << id;
  }
}

// n > 1: choice 0 is recorded under the response id, choice i under "<id>-<i>".
TEST_F(Chat, EachChoiceOfSeveralIsRewardedByTheResponseIdAndItsIndex) {
  start("hf");
  const std::string key = start_session("choices");
  std::map<std::string, double> rewarded;
  for (const bool stream : {false, true}) {
    const ordered_json body = {{"messages", {user(stream ? "streamed" : "whole")}}, {"max_tokens", 2}, {"n", 3}, {"stream", stream}};
    auto [status, reply] = raw("/v1/chat/completions", body.dump(), key);
    ASSERT_EQ(status, 200) << reply;
    const std::string id = id_of("/v1/chat/completions", stream, reply);
    for (int i = 0; i < 3; ++i) {
      const std::string choice_id = i == 0 ? id : id + "-" + std::to_string(i);
      const double reward = (stream ? 10 : 20) + i;
      EXPECT_EQ(post("/rl/set_reward", {{"interaction_id", choice_id}, {"reward", reward}}, key).first, 200) << choice_id;
      rewarded[choice_id] = reward;
    }
  }
  const auto exported = end_and_export(key, "choices-0");
  ASSERT_EQ(exported["rows"].size(), 6u);
  for (const auto& row : exported["rows"]) {
    const std::string id = row["interaction_id"];
    ASSERT_TRUE(rewarded.count(id)) << id;
    EXPECT_DOUBLE_EQ(row["reward"].get<double>(), rewarded[id]) << id;
  }
}

// The mock backend's table with a submit that refuses every second request
// (a backend failing mid-way through a request's choices).
namespace {
std::atomic<int> submits{0};
const areal_inference_vtable* plugin_table = nullptr;
areal_status* refusing_every_second_submit(void* self, const areal_gen_request* r, const areal_gen_sink* sink) {
  if (++submits % 2 == 0) return areal::make_status(AREAL_CODE_UNAVAILABLE, "the backend refused this request (a test)");
  return plugin_table->submit(self, r, sink);
}
// The plugin's table with `Submit` in its submit slot (the wrap_inference_ hook).
template <areal_status* (*Submit)(void*, const areal_gen_request*, const areal_gen_sink*)>
const areal_inference_vtable* with_submit(const areal_inference_vtable* plugin) {
  static areal_inference_vtable table;
  plugin_table = plugin;
  table = *plugin;
  table.submit = Submit;
  return &table;
}
}  // namespace

// n > 1 unstreamed, failing at its second choice: the client gets the error
// and no id, so the first choice is no call of the session either (not
// exported, not the target of a reward for "the last call").
TEST_F(Chat, ARequestWhoseLaterChoiceFailsLeavesNoCallBehind) {
  wrap_inference_ = with_submit<refusing_every_second_submit>;
  start("hf");
  const std::string key = start_session("partial");
  submits = 0;
  auto [ok_status, ok] = post("/v1/chat/completions", {{"messages", {user("first")}}, {"max_tokens", 2}}, key);  // submit 1
  ASSERT_EQ(ok_status, 200) << ok.dump();
  submits = 2;  // the next is submit 3 (served), then 4 (refused)
  auto [status, reply] = post("/v1/chat/completions", {{"messages", {user("second")}}, {"max_tokens", 2}, {"n", 2}}, key);
  ASSERT_EQ(status, 502) << reply.dump();
  // A reward for "the last call" goes to the call the client saw answered.
  auto [rs, rr] = post("/rl/set_reward", {{"reward", 0.75}}, key);
  ASSERT_EQ(rs, 200) << rr.dump();
  const auto exported = end_and_export(key, "partial-0");
  ASSERT_EQ(exported["rows"].size(), 1u) << exported.dump();
  EXPECT_EQ(exported["rows"][0]["interaction_id"], ok["id"]);
  EXPECT_DOUBLE_EQ(exported["rows"][0]["reward"].get<double>(), 0.75);
}

// The mock backend's table with a sink that reports every request as
// aborted once the backend is done with it (an engine stopping mid-reply).
namespace {
struct AbortingSink {
  areal_gen_sink inner, outer;
};
areal_status* forward_tokens(void* ctx, const areal_gen_chunk* c) {
  auto* s = static_cast<AbortingSink*>(ctx);
  return s->inner.on_tokens(s->inner.ctx, c);
}
void done_as_aborted(void* ctx, int32_t, const areal_status*) {
  auto* s = static_cast<AbortingSink*>(ctx);
  s->inner.on_done(s->inner.ctx, AREAL_FINISH_ABORT, nullptr);
  delete s;
}
areal_status* submit_aborting(void* self, const areal_gen_request* r, const areal_gen_sink* sink) {
  auto* s = new AbortingSink{*sink, {}};
  s->outer = areal_gen_sink{AREAL_OFFSET_OF_END(areal_gen_sink, on_done), s, &forward_tokens, &done_as_aborted};
  areal_status* st = plugin_table->submit(self, r, &s->outer);
  if (st != nullptr) delete s;
  return st;
}
}  // namespace

// A generation the backend aborted (it is stopping) is a failed call, not a
// reply cut at "length" that the trainer would learn from.
TEST_F(Chat, AGenerationTheBackendAbortedIsNotRecordedAsAReply) {
  wrap_inference_ = with_submit<submit_aborting>;
  start("hf");
  const std::string key = start_session("aborted");
  auto [status, reply] = post("/v1/chat/completions", {{"messages", {user("hi")}}, {"max_tokens", 2}}, key);
  EXPECT_EQ(status, 502) << reply.dump();
  EXPECT_NE(reply.dump().find("aborted"), std::string::npos) << reply.dump();
  auto [rs, rr] = post("/rl/set_reward", {{"reward", 1.0}}, key);
  EXPECT_EQ(rs, 400) << rr.dump();  // every call failed: nothing to reward
  const auto exported = end_and_export(key, "aborted-0");
  EXPECT_EQ(exported["rows"].size(), 0u) << exported.dump();
}

// An empty think block (a forced call, thinking off) is announced by no
// stream: the final Responses object and Anthropic message list only what
// the stream did (a client assembling items from the stream must match it).
TEST_F(Chat, AnEmptyThinkBlockIsNoItemInTheStreamOrTheFinalObject) {
  start("hf", {"<think>\n\n</think>\n\nHello there<|im_end|>"});
  const std::string key = start_session("empty-think");
  auto [status, text] = raw("/v1/responses", ordered_json{{"input", "Hi"}, {"stream", true}, {"max_output_tokens", 20}}.dump(), key);
  ASSERT_EQ(status, 200) << text;
  std::vector<std::string> streamed;
  ordered_json final;
  for (const auto& event : sse_data(text)) {
    if (event["type"] == "response.output_item.added") streamed.push_back(event["item"]["type"]);
    if (event["type"] == "response.completed") final = event["response"];
  }
  ASSERT_FALSE(final.is_null()) << text;
  std::vector<std::string> listed;
  for (const auto& item : final["output"]) listed.push_back(item["type"]);
  EXPECT_EQ(listed, streamed);
  EXPECT_EQ(listed, (std::vector<std::string>{"message"}));
  auto [s2, text2] = raw("/v1/messages", ordered_json{{"model", "m"}, {"max_tokens", 20}, {"stream", true},
                                                      {"messages", {{{"role", "user"}, {"content", "Hi"}}}}}.dump(), key);
  ASSERT_EQ(s2, 200) << text2;
  std::vector<std::string> blocks;
  for (const auto& event : sse_data(text2))
    if (event["type"] == "content_block_start") blocks.push_back(event["content_block"]["type"]);
  EXPECT_EQ(blocks, (std::vector<std::string>{"text"}));
  auto [s3, whole] = post("/v1/messages", {{"model", "m"}, {"max_tokens", 20}, {"messages", {{{"role", "user"}, {"content", "Hi"}}}}}, key);
  ASSERT_EQ(s3, 200) << whole.dump();
  ASSERT_EQ(whole["content"].size(), 1u) << whole.dump();
  EXPECT_EQ(whole["content"][0]["type"], "text");
}

// A streamed response's items carry the same ids in the stream and in the
// final response object, and its id continues the conversation.
TEST_F(Chat, AStreamedResponsesIdsAgreeAndItsIdContinuesTheConversation) {
  start("hf", {"<think>\nhm\n</think>\n\nHello there<|im_end|>"});
  const std::string key = start_session("streamed");
  auto [status, text] = raw("/v1/responses", ordered_json{{"input", "Hi"}, {"stream", true}, {"max_output_tokens", 20}}.dump(), key);
  ASSERT_EQ(status, 200) << text;
  std::string id;
  std::vector<std::string> streamed_items;
  ordered_json final;
  for (const auto& event : sse_data(text)) {
    if (event["type"] == "response.created") id = event["response"]["id"];
    if (event["type"] == "response.output_item.added") streamed_items.push_back(event["item"]["id"]);
    if (event["type"] == "response.completed") final = event["response"];
  }
  ASSERT_FALSE(final.is_null()) << text;
  EXPECT_EQ(final["id"], id);
  ASSERT_EQ(final["output"].size(), 2u) << final.dump();
  ASSERT_EQ(streamed_items.size(), 2u);
  const std::string hex = id.substr(std::string("resp_").size());
  EXPECT_EQ(final["output"][0]["id"], "rs_" + hex);
  EXPECT_EQ(final["output"][1]["id"], "msg_" + hex);
  EXPECT_EQ(streamed_items, (std::vector<std::string>{"rs_" + hex, "msg_" + hex}));
  auto [s2, r2] = post("/v1/responses", {{"input", "More"}, {"previous_response_id", id}, {"max_output_tokens", 2}}, key);
  ASSERT_EQ(s2, 200) << r2.dump();
  const auto exported = end_and_export(key, "streamed-0");
  ASSERT_EQ(exported["rows"].size(), 2u);
  EXPECT_EQ(exported["rows"][0]["interaction_id"], id);
  const auto first = exported["rows"][0]["input_ids"].get<std::vector<int32_t>>();
  const auto second = exported["rows"][1]["input_ids"].get<std::vector<int32_t>>();
  ASSERT_GT(second.size(), first.size());
  EXPECT_TRUE(std::equal(first.begin(), first.end(), second.begin())) << "turn 2 extends the streamed turn's exact ids";
}

// /rl/end_session's interaction_count is what the export holds: calls the
// gateway refused after recording them are not counted.
TEST_F(Chat, EndSessionCountsOnlyTheCallsThatAnswered) {
  start("hf");
  const std::string key = start_session("count");
  ASSERT_EQ(post("/v1/chat/completions", {{"messages", {user("Hi")}}, {"max_tokens", 2}}, key).first, 200);
  EXPECT_EQ(post("/v1/chat/completions", {{"messages", {user("Hi there")}}, {"max_total_tokens", 3}}, key).first, 400);  // no room left
  std::string long_prompt;
  for (int i = 0; i < 5000; ++i) long_prompt += " x";
  EXPECT_EQ(post("/v1/messages", {{"messages", {user(long_prompt)}}, {"max_tokens", 2}}, key).first, 400);  // over the context
  auto [status, ended] = post("/rl/end_session", ordered_json::object(), key);
  ASSERT_EQ(status, 200) << ended.dump();
  EXPECT_EQ(ended["interaction_count"], 1);
  auto [es, exported] = post("/export_trajectories", {{"session_id", "count-0"}}, "admin-k");
  ASSERT_EQ(es, 200);
  EXPECT_EQ(exported["rows"].size(), 1u);
}

// Rewards whose magnitudes add up past half the double range are refused
// (400, nothing changed): no exported return can become inf, which JSON
// writes as null. final_reward is held to the same bound.
TEST_F(Chat, RewardsThatWouldOverflowTheExportAreRefused) {
  start("hf");
  const std::string key = start_session("big");
  std::vector<std::string> ids;
  for (const char* q : {"one", "two"}) {
    auto [status, reply] = post("/v1/chat/completions", {{"messages", {user(q)}}, {"max_tokens", 2}}, key);
    ASSERT_EQ(status, 200);
    ids.push_back(reply["id"]);
  }
  EXPECT_EQ(post("/rl/set_reward", {{"interaction_id", ids[0]}, {"reward", 8e307}}, key).first, 200);
  auto [s1, r1] = post("/rl/set_reward", {{"interaction_id", ids[1]}, {"reward", 8e307}}, key);
  EXPECT_EQ(s1, 400) << r1.dump();
  EXPECT_NE(r1["error"]["message"].get<std::string>().find("'reward': "), std::string::npos) << r1.dump();
  EXPECT_NE(r1["error"]["message"].get<std::string>().find("total magnitude"), std::string::npos) << r1.dump();
  auto [s2, r2] = post("/rl/v1/finalize", {{"final_reward", 8e307}}, key);
  EXPECT_EQ(s2, 400) << r2.dump();
  EXPECT_NE(r2["error"]["message"].get<std::string>().find("'final_reward': "), std::string::npos) << r2.dump();
  // Nothing changed and the session is still active: a reward in range goes through.
  auto [s3, r3] = post("/rl/v1/finalize", {{"final_reward", 0.5}}, key);
  ASSERT_EQ(s3, 200) << r3.dump();
  EXPECT_EQ(r3["interaction_count"], 2);
  auto [es, text] = raw("/export_trajectories", ordered_json{{"session_id", "big-0"}}.dump(), "admin-k");
  ASSERT_EQ(es, 200) << text;
  EXPECT_EQ(text.find("null"), std::string::npos) << "every number in the export is finite: " << text;
  const auto exported = ordered_json::parse(text);
  ASSERT_EQ(exported["rows"].size(), 2u);
  EXPECT_DOUBLE_EQ(exported["rows"][0]["reward"].get<double>(), 8e307);
  EXPECT_DOUBLE_EQ(exported["rows"][1]["reward"].get<double>(), 0.5);
}

// Issue #32: frameworks send the assistant's tool-call turn back with content
// null or without content; OpenAI and vLLM serve both. The real Qwen3
// template refused them ('NoneType' is not iterable / undefined + string).
TEST_F(Chat, AssistantTurnsWithContentNullOrAbsentAreServed) {
  start("hf");
  const std::string key = start_session("toolloop");
  const ordered_json tools = {{{"type", "function"}, {"function", {{"name", "add"}, {"parameters", {{"type", "object"}}}}}}};
  const ordered_json call = {{{"id", "call_1"}, {"type", "function"}, {"function", {{"name", "add"}, {"arguments", "{\"a\": 2}"}}}}};
  const std::vector<ordered_json> assistant_turns = {
      {{"role", "assistant"}, {"content", nullptr}, {"tool_calls", call}},       // OpenAI's own shape
      {{"role", "assistant"}, {"tool_calls", call}},                             // no content key
      {{"role", "assistant"}, {"content", nullptr}},                             // neither text nor calls
      {{"role", "assistant"}},                                                   // bare
  };
  for (const auto& turn : assistant_turns) {
    ordered_json messages = {user("What is 2+3?"), turn};
    if (turn.contains("tool_calls")) messages.push_back({{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "5"}});
    else messages.push_back(user("and then?"));
    for (const bool stream : {false, true}) {
      ordered_json body = {{"messages", messages}, {"tools", tools}, {"max_tokens", 4}, {"stream", stream}};
      auto [status, text] = raw("/v1/chat/completions", body.dump(), key);
      EXPECT_EQ(status, 200) << turn.dump() << " stream " << stream << ": " << text;
      if (stream) EXPECT_NE(text.find("data: [DONE]"), std::string::npos) << text;
    }
  }
}

// A refusal found before a stream starts (the template, the context) is an
// HTTP 4xx with the API's error body, as unstreamed; logged and counted.
TEST_F(Chat, RefusalsBeforeAStreamStartsAre4xxLoggedAndCounted) {
  start("hf");
  const std::string key = start_session("refused");
  std::string big;
  for (int i = 0; i < 5000; ++i) big += " x";  // one token each: 5000 > 4096
  const double before = metric("areal_gateway_error_responses_total{status=\"400\"}");
  struct Case {
    std::string path;
    ordered_json body;
  };
  const std::vector<Case> cases = {
      {"/v1/chat/completions", {{"messages", {user(big)}}, {"stream", true}}},
      {"/v1/messages", {{"model", "m"}, {"max_tokens", 5}, {"messages", {user(big)}}, {"stream", true}}},
      {"/v1/responses", {{"model", "m"}, {"input", big}, {"stream", true}}},
  };
  for (const auto& c : cases) {
    auto [status, text] = raw(c.path, c.body.dump(), key);
    EXPECT_EQ(status, 400) << c.path << ": " << text;
    const auto reply = ordered_json::parse(text, nullptr, false);
    ASSERT_FALSE(reply.is_discarded()) << c.path << " answered a stream, not an error body: " << text.substr(0, 200);
    EXPECT_NE(reply.dump().find("leaves no room"), std::string::npos) << reply.dump();
  }
  EXPECT_EQ(metric("areal_gateway_error_responses_total{status=\"400\"}") - before, 3.0);
}
