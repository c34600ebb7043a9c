// The `local` inference plugin, loaded from the build's plugin folder and
// created with a config, for tests that drive it through its ABI table.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/plugin_host/error.hpp"
#include "core/plugin_host/generation.hpp"
#include "core/plugin_host/plugin_catalog.hpp"
#include "core/plugin_host/plugin_instance.hpp"

namespace areal::testing {

struct LocalEngine {
  areal::PluginCatalog catalog{{AREAL_TEST_PLUGIN_DIR}};
  std::shared_ptr<areal::LoadedPlugin> plugin = catalog.resolve("local", AREAL_KIND_INFERENCE);
  std::string name = "test";
  areal_services services = areal::make_services(name);
  areal::PluginInstance instance;
  explicit LocalEngine(const nlohmann::json& config) : instance(plugin, config.dump(), &services) {}
  const areal_inference_vtable& vt() const { return *plugin->inference(); }

  // Submits every prompt at once (they decode together), sampling at
  // temperature 1 for exactly max_new tokens, each asking for its routing.
  std::vector<std::unique_ptr<areal::CollectingSink>> submit_recording_routing(const std::vector<std::vector<int32_t>>& prompts, int32_t max_new) {
    areal_sampling_params s{};
    s.struct_size = AREAL_OFFSET_OF_END(areal_sampling_params, json_schema);
    s.temperature = 1.0f, s.top_p = 1.0f, s.max_new_tokens = max_new, s.ignore_eos = 1;
    std::vector<std::unique_ptr<areal::CollectingSink>> sinks;
    for (const auto& p : prompts) {
      areal_gen_request r{};
      r.struct_size = AREAL_OFFSET_OF_END(areal_gen_request, record_routing);
      r.request_id = areal::next_request_id();
      r.input_ids = p.data(), r.input_ids_count = p.size(), r.sampling = &s;  // borrowed for the submit call only (the ABI)
      r.record_routing = 1;
      sinks.push_back(std::make_unique<areal::CollectingSink>());
      areal::throw_if_status(vt().submit(instance.self(), &r, sinks.back()->sink()), "submit");
    }
    return sinks;
  }

  // Submits every prompt at once, seeded sampling at temperature 1 for
  // exactly max_new tokens (request i seeded first_seed + i), and waits;
  // with `adapter`, the even-numbered requests name it.
  std::vector<areal::GenerationResult> generate_seeded(const std::vector<std::vector<int32_t>>& prompts, int32_t max_new,
                                                       const std::string& adapter = "", uint64_t first_seed = 100) {
    std::vector<std::unique_ptr<areal::CollectingSink>> sinks;
    for (size_t i = 0; i < prompts.size(); ++i) {
      areal_sampling_params s{};
      s.struct_size = AREAL_OFFSET_OF_END(areal_sampling_params, json_schema);
      s.temperature = 1.0f, s.top_p = 1.0f, s.max_new_tokens = max_new, s.ignore_eos = 1;
      s.has_seed = 1, s.seed = first_seed + i;
      areal_gen_request r{};
      r.struct_size = AREAL_OFFSET_OF_END(areal_gen_request, adapter);
      if (!adapter.empty() && i % 2 == 0) r.adapter = areal_str{adapter.data(), adapter.size()};
      r.request_id = areal::next_request_id();
      r.input_ids = prompts[i].data(), r.input_ids_count = prompts[i].size(), r.sampling = &s;
      sinks.push_back(std::make_unique<areal::CollectingSink>());
      areal::throw_if_status(vt().submit(instance.self(), &r, sinks.back()->sink()), "submit");
    }
    std::vector<areal::GenerationResult> out;
    for (auto& s : sinks) {
      EXPECT_TRUE(s->wait(std::chrono::seconds(60)));
      out.push_back(s->result());
    }
    return out;
  }
};

}  // namespace areal::testing
