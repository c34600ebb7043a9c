// The gateway's session endpoints over real HTTP on loopback: AReaL's
// contract for the happy paths and every error status.
#include <filesystem>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>
#include <memory>
#include <thread>

#include <Poco/Net/HTTPClientSession.h>
#include <Poco/Net/HTTPRequest.h>
#include <Poco/Net/HTTPResponse.h>
#include <Poco/URI.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/plugin_host/error.hpp"
#include "core/plugin_host/plugin_instance.hpp"
#include "core/plugin_host/string_writer.hpp"
#include "core/telemetry/metrics.hpp"
#include "gateway_builtin.h"

using nlohmann::ordered_json;

namespace {

struct Reply {
  int status;
  ordered_json body;
};

class Gateway : public ::testing::Test {
 protected:
  void start(const std::string& extra = "") {
    areal::register_builtin("gateway", &areal_builtin_gateway_init);
    plugin_ = areal::load_builtin("gateway");
    if (jsonl_.empty()) {  // a test may name its own before start()
      jsonl_ = own_jsonl_ = (std::filesystem::temp_directory_path() / ("areal-gw-" + std::to_string(::getpid()) + ".jsonl")).string();
      std::filesystem::remove(jsonl_);
    }
    const std::string cfg = R"({"host": "127.0.0.1", "port": 0, "admin_api_key": "test-admin", "max_threads": 8, "max_queued": 16,
      "capacity": 2, "session_timeout_seconds": 3600, "turn_discount": 1.0, "export_style": "individual",
      "max_request_bytes": 4096, "trajectories_jsonl": ")" + jsonl_ + "\"" + extra + "}";
    services_ = areal::make_services(name_);
    inst_ = std::make_unique<areal::PluginInstance>(plugin_, cfg, &services_);
    areal::StringCollector url;
    areal::throw_if_status(plugin_->gateway()->start(inst_->self(), url.writer()), "start");
    url_ = url.text;
  }
  void TearDown() override {
    inst_.reset();
    if (!own_jsonl_.empty()) std::filesystem::remove(own_jsonl_);  // only the file this fixture made (never /dev/full)
  }

  Reply call(const std::string& method, const std::string& path, const std::string& body, const std::string& token,
             const std::string& content_type = "application/json", bool x_api_key = false) {
    Poco::URI uri(url_);
    Poco::Net::HTTPClientSession s(uri.getHost(), uri.getPort());
    Poco::Net::HTTPRequest req(method, path, Poco::Net::HTTPMessage::HTTP_1_1);
    if (!token.empty()) {
      if (x_api_key) req.set("x-api-key", token);
      else req.set("Authorization", "Bearer " + token);
    }
    if (!body.empty()) {
      req.setContentType(content_type);
      req.setContentLength(static_cast<std::streamsize>(body.size()));
    }
    s.sendRequest(req) << body;
    Poco::Net::HTTPResponse res;
    std::stringstream ss;
    ss << s.receiveResponse(res).rdbuf();
    Reply r{static_cast<int>(res.getStatus()), nullptr};
    if (!ss.str().empty()) r.body = ordered_json::parse(ss.str());
    return r;
  }
  Reply post(const std::string& path, const ordered_json& body, const std::string& token) {
    return call("POST", path, body.is_null() ? "{}" : body.dump(), token);  // `{}` in C++ is JSON null
  }

  std::string name_ = "gateway";
  std::shared_ptr<areal::LoadedPlugin> plugin_;
  areal_services services_{};
  std::unique_ptr<areal::PluginInstance> inst_;
  std::string url_, jsonl_, own_jsonl_;
};

void expect_error(const Reply& r, int status, const std::string& message_part) {
  EXPECT_EQ(r.status, status) << r.body.dump();
  ASSERT_TRUE(r.body.contains("error")) << r.body.dump();
  EXPECT_NE(r.body["error"]["message"].get<std::string>().find(message_part), std::string::npos) << r.body.dump();
  EXPECT_TRUE(r.body["error"].contains("type") && r.body["error"].contains("code"));
}

}  // namespace

TEST_F(Gateway, SessionLifecycleAndExport) {
  start();
  auto s = post("/rl/start_session", {{"task_id", "math-7"}}, "test-admin");
  ASSERT_EQ(s.status, 200) << s.body.dump();
  EXPECT_EQ(s.body["session_id"], "math-7-0");
  EXPECT_EQ(s.body["group_id"], "math-7");
  const std::string key = s.body["api_key"];
  expect_error(post("/rl/set_reward", {{"reward", 1.0}}, key), 400, "No interactions in session");
  auto ended = call("POST", "/rl/end_session", "{}", key, "application/json", /*x_api_key=*/true);
  EXPECT_EQ(ended.status, 200);
  EXPECT_EQ(ended.body["interaction_count"], 0);
  expect_error(post("/rl/end_session", {}, key), 410, "already ended");
  auto exported = post("/export_trajectories", {{"session_id", "math-7-0"}}, "test-admin");
  ASSERT_EQ(exported.status, 200) << exported.body.dump();
  EXPECT_EQ(exported.body["rows"].size(), 0u);
  EXPECT_EQ(exported.body["end_reason"], "ended");
  std::ifstream jsonl(jsonl_);
  std::string line;
  ASSERT_TRUE(std::getline(jsonl, line));
  EXPECT_EQ(ordered_json::parse(line)["session_id"], "math-7-0");
  expect_error(post("/export_trajectories", {{"session_id", "math-7-0"}}, "test-admin"), 404, "not found");
}

// gateway.trajectories_jsonl is a copy: a full disk loses the copy (logged
// and counted), never the session, which the export still answers whole.
TEST_F(Gateway, AFullDiskUnderTheJsonlCopyLosesTheCopyNotTheSession) {
  jsonl_ = "/dev/full";  // opens for appending; every write fails with ENOSPC
  start();
  const double before = areal::Metrics::global().get("areal_gateway_trajectories_jsonl_errors_total");
  auto s = post("/rl/start_session", {{"task_id", "full"}}, "test-admin");
  ASSERT_EQ(s.status, 200) << s.body.dump();
  ASSERT_EQ(post("/rl/end_session", {}, s.body["api_key"].get<std::string>()).status, 200);
  auto exported = post("/export_trajectories", {{"session_id", "full-0"}}, "test-admin");
  ASSERT_EQ(exported.status, 200) << exported.body.dump();
  EXPECT_EQ(exported.body["session_id"], "full-0");
  EXPECT_EQ(areal::Metrics::global().get("areal_gateway_trajectories_jsonl_errors_total") - before, 1.0);
}

// A trajectories_jsonl that cannot be opened is refused at start, not at the first export.
TEST_F(Gateway, AnUnopenableJsonlPathIsRefusedAtStart) {
  jsonl_ = "/nonexistent-areal-dir/trajectories.jsonl";
  try {
    start();
    FAIL() << "the gateway started with an unopenable trajectories_jsonl";
  } catch (const areal::Error& e) {
    EXPECT_EQ(e.code(), AREAL_CODE_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("trajectories_jsonl"), std::string::npos) << e.what();
  }
}

// Finalizes racing each other (an agent's retry, two workers): one ends the
// session, every other is told it is gone (410), never a 400 for a request
// that was valid when sent. The state dir's commit widens the window.
TEST_F(Gateway, FinalizesRacingAnEndAreAnsweredGone) {
  const auto dir = std::filesystem::temp_directory_path() / ("areal-gw-state-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  start(R"(, "state_dir": ")" + dir.string() + "\"");
  for (int round = 0; round < 20; ++round) {
    auto s = post("/rl/start_session", {{"task_id", "race"}}, "test-admin");
    ASSERT_EQ(s.status, 200) << s.body.dump();
    const std::string key = s.body["api_key"];
    std::vector<Reply> replies(8);
    std::vector<std::thread> clients;
    for (size_t k = 0; k < replies.size(); ++k)
      clients.emplace_back([&, k] {
        replies[k] = post("/rl/v1/finalize", k % 2 ? ordered_json{{"final_reward", 1.0}} : ordered_json::object(), key);
      });
    for (auto& t : clients) t.join();
    int ok = 0;
    for (const auto& r : replies) {
      if (r.status == 200) ++ok;
      else EXPECT_EQ(r.status, 410) << r.body.dump();
    }
    EXPECT_EQ(ok, 1);
    ASSERT_EQ(post("/grant_capacity", {}, "test-admin").status, 200);
  }
  inst_.reset();
  std::filesystem::remove_all(dir);
}

TEST_F(Gateway, AuthErrors) {
  start();
  expect_error(post("/rl/start_session", {{"task_id", "t"}}, ""), 401, "Missing or malformed Authorization header");
  expect_error(post("/rl/start_session", {{"task_id", "t"}}, "wrong"), 403, "Invalid admin API key.");
  expect_error(post("/rl/set_reward", {{"reward", 1}}, "sk-sess-unknown"), 401, "Invalid or expired session API key.");
  expect_error(post("/rl/set_reward", {{"reward", 1}}, "test-admin"), 401, "admin key cannot act as a session");
  expect_error(post("/grant_capacity", {}, "nope"), 403, "Invalid admin API key.");
}

TEST_F(Gateway, RequestErrors) {
  start();
  expect_error(call("POST", "/rl/start_session", "{not json", "test-admin"), 400, "not valid JSON");
  expect_error(call("POST", "/rl/start_session", "[1]", "test-admin"), 400, "must be a JSON object");
  expect_error(call("POST", "/rl/start_session", "{\"task_id\": 1}", "test-admin"), 400, "'task_id' (a string) is required");
  expect_error(call("POST", "/rl/start_session", "task_id=x", "test-admin", "application/x-www-form-urlencoded"), 415, "Content-Type");
  expect_error(call("POST", "/rl/start_session", std::string(5000, ' ') + "{}", "test-admin"), 413, "exceeds the limit");
  expect_error(call("GET", "/rl/start_session", "", "test-admin"), 405, "not allowed");
  expect_error(post("/rl/start_session", {{"task_id", "t"}, {"api_key", "test-admin"}}, "test-admin"), 400, "admin API key");
  auto s = post("/rl/start_session", {{"task_id", "t"}}, "test-admin");
  expect_error(post("/rl/set_reward", {{"reward", "high"}}, s.body["api_key"]), 400, "finite number");
  expect_error(post("/export_trajectories", {{"session_id", s.body["session_id"]}}, "test-admin"), 409, "still active");
  expect_error(post("/export_trajectories", {{"session_id", s.body["session_id"]}, {"style", "tree"}}, "test-admin"), 400,
               "style must be 'individual' or 'concat'");
}

TEST_F(Gateway, CapacityAnswers429UntilGranted) {
  start();
  EXPECT_EQ(post("/rl/start_session", {{"task_id", "t"}}, "test-admin").status, 200);
  EXPECT_EQ(post("/rl/start_session", {{"task_id", "t"}}, "test-admin").status, 200);
  expect_error(post("/rl/start_session", {{"task_id", "t"}}, "test-admin"), 429, "No available capacity");
  EXPECT_EQ(post("/grant_capacity", {}, "test-admin").body["capacity"], 1);
  EXPECT_EQ(post("/rl/start_session", {{"task_id", "t"}}, "test-admin").status, 200);
}

TEST_F(Gateway, FixedKeyRefreshEndsTheOldSessionAndKeepsItForExport) {
  start();
  ASSERT_EQ(post("/grant_capacity", {}, "test-admin").status, 200);
  auto first = post("/rl/start_session", {{"task_id", "chat"}, {"api_key", "sk-user-fixed-key"}}, "test-admin");
  ASSERT_EQ(first.status, 200);
  auto second = post("/rl/start_session", {{"task_id", "chat"}, {"api_key", "sk-user-fixed-key"}}, "test-admin");
  ASSERT_EQ(second.status, 200) << second.body.dump();
  EXPECT_EQ(second.body["ended_session_id"], first.body["session_id"]);
  EXPECT_EQ(second.body["api_key"], "sk-user-fixed-key");
  auto old = post("/export_trajectories", {{"session_id", first.body["session_id"]}}, "test-admin");
  EXPECT_EQ(old.status, 200);
  EXPECT_EQ(old.body["end_reason"], "refreshed");
}

TEST_F(Gateway, IdleSessionsExpireOnATimerAndStayExportable) {
  start(R"(, "session_timeout_seconds": 0.3)");
  auto s = post("/rl/start_session", {{"task_id", "idle"}}, "test-admin");
  ASSERT_EQ(s.status, 200);
  usleep(900 * 1000);  // timeout 0.3 s, sweeps every 75 ms
  expect_error(post("/rl/set_reward", {{"reward", 1}}, s.body["api_key"]), 410, "expired");
  auto e = post("/export_trajectories", {{"session_id", "idle-0"}}, "test-admin");
  EXPECT_EQ(e.status, 200);
  EXPECT_EQ(e.body["end_reason"], "expired");
}

TEST_F(Gateway, EarlyRejectionsDoNotPoisonKeepAliveConnections) {
  start();
  // Two requests on one connection; the first is refused (401) before its
  // body matters (wrong admin key). The second must still parse cleanly.
  Poco::URI uri(url_);
  Poco::Net::HTTPClientSession s(uri.getHost(), uri.getPort());
  s.setKeepAlive(true);
  for (const auto& [token, want] : std::vector<std::pair<std::string, int>>{{"sk-sess-unknown", 403}, {"test-admin", 200}}) {
    Poco::Net::HTTPRequest req("POST", "/rl/start_session", Poco::Net::HTTPMessage::HTTP_1_1);
    req.setKeepAlive(true);
    req.set("Authorization", "Bearer " + token);
    const std::string body = std::string(R"({"task_id": "keepalive", "padding": ")") + std::string(3000, 'x') + R"("})";
    req.setContentType("application/json");
    req.setContentLength(static_cast<std::streamsize>(body.size()));
    s.sendRequest(req) << body;
    Poco::Net::HTTPResponse res;
    std::stringstream ss;
    ss << s.receiveResponse(res).rdbuf();
    EXPECT_EQ(static_cast<int>(res.getStatus()), want) << ss.str();
    EXPECT_FALSE(ss.str().empty());
  }
}

TEST(GatewayConfig, DefaultAdminKeyIsRefusedOnANonLoopbackHost) {
  areal::register_builtin("gateway", &areal_builtin_gateway_init);
  auto plugin = areal::load_builtin("gateway");
  std::string name = "gateway";
  auto services = areal::make_services(name);
  try {
    areal::PluginInstance inst(plugin, R"({"host": "0.0.0.0", "port": 0, "admin_api_key": "areal-admin-key", "max_threads": 4,
      "max_queued": 4, "capacity": -1, "session_timeout_seconds": 10, "turn_discount": 1, "export_style": "individual",
      "trajectories_jsonl": "", "max_request_bytes": 4096})", &services);
    FAIL() << "accepted the default admin key on 0.0.0.0";
  } catch (const areal::Error& e) {
    EXPECT_NE(std::string(e.what()).find("default admin_api_key is refused on a non-loopback host"), std::string::npos) << e.what();
  }
}
