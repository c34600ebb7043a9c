// The local engine serving LoRA adapters beside its base model (issue #34,
// ABI 1.6): requests of two adapters and of the base in one batch, each
// checked against the model recomputed alone with that request's adapter
// (DecoderModel::set_lora, a separate forward over prompt + output);
// adapters loaded from a folder (config) and from memory (load_adapter with
// tensors), replaced, unloaded, and their versions stamped on the tokens.
#include <chrono>
#include <cstdint>
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/hf/model_files/init_model.hpp"
#include "core/hf/model_files/safetensors.hpp"
#include "core/plugin_host/error.hpp"
#include "core/plugin_host/generation.hpp"
#include "decoder_model.hpp"
#include "local_engine.hpp"
#include "lora_adapter.hpp"
#include "test_temp_dir.hpp"

namespace fs = std::filesystem;
using areal::torch_model::DecoderModel;
using areal::torch_model::LoraAdapter;
using areal::torch_model::LoraConfig;
using J = nlohmann::json;

namespace {

struct Fixture {
  std::string model_dir, a_dir, b_dir;
};

// A tiny Qwen3 and two trained-looking adapters (B not zero) of different
// ranks and targets, saved as PEFT folders.
const Fixture& fixture() {
  static const Fixture f = [] {
    Fixture x;
    const std::string root = areal::testing::test_temp_dir("lora-serving");
    x.model_dir = root + "/model";
    x.a_dir = root + "/adapter-a";
    x.b_dir = root + "/adapter-b";
    areal::model::InitModelOptions o;
    o.family = "qwen3";
    o.preset = "tiny";
    o.tokenizer_dir = "bytes";
    o.out_dir = x.model_dir;
    o.seed = 3;
    if (!fs::exists(x.model_dir + "/config.json")) areal::model::init_model(o);
    const DecoderModel m = DecoderModel::load(x.model_dir, torch::kFloat32);
    const J configs[2] = {{{"rank", 4}, {"alpha", 8}, {"target_modules", "all-linear"}},
                          {{"rank", 2}, {"alpha", 4}, {"target_modules", {"q_proj", "v_proj", "down_proj"}}}};
    const std::string dirs[2] = {x.a_dir, x.b_dir};
    for (int i = 0; i < 2; ++i) {
      LoraAdapter a = LoraAdapter::init(LoraConfig::from_json(configs[i], "lora"), m.config(), 11 + i);
      torch::NoGradGuard no_grad;
      torch::manual_seed(21 + i);
      for (auto& t : a.parameters()) t.add_(torch::randn_like(t) * 0.3);
      a.save(dirs[i], x.model_dir);
    }
    return x;
  }();
  return f;
}

struct Engine : areal::testing::LocalEngine {
  explicit Engine(const J& config) : LocalEngine(config) {}

  // Submits each (prompt, adapter) while the engine is paused, so they are
  // admitted, prefilled and decoded together, then waits for all.
  std::vector<areal::GenerationResult> run_together(const std::vector<int32_t>& prompt, const std::vector<std::string>& adapters) {
    areal::throw_if_status(vt().pause(instance.self()), "pause");
    std::vector<std::unique_ptr<areal::CollectingSink>> sinks;
    areal_sampling_params s{};
    s.struct_size = AREAL_OFFSET_OF_END(areal_sampling_params, json_schema);
    s.temperature = 1.0f;
    s.top_p = 1.0f;
    s.max_new_tokens = 8;
    s.ignore_eos = 1;
    s.has_seed = 1;
    for (size_t i = 0; i < adapters.size(); ++i) {
      s.seed = 100 + i;
      areal_gen_request r{};
      r.struct_size = AREAL_OFFSET_OF_END(areal_gen_request, adapter);
      r.request_id = areal::next_request_id();
      r.input_ids = prompt.data();
      r.input_ids_count = prompt.size();
      r.sampling = &s;
      r.adapter = areal_str{adapters[i].data(), adapters[i].size()};
      sinks.push_back(std::make_unique<areal::CollectingSink>());
      areal::throw_if_status(vt().submit(instance.self(), &r, sinks.back()->sink()), "submit");
    }
    areal::throw_if_status(vt().resume(instance.self()), "resume");
    std::vector<areal::GenerationResult> out;
    for (auto& sink : sinks) {
      EXPECT_TRUE(sink->wait(std::chrono::seconds(60)));
      out.push_back(sink->result());
    }
    return out;
  }
  void load(const J& spec, const areal_tensor_map* tensors = nullptr) {
    const std::string text = spec.dump();
    areal::throw_if_status(vt().load_adapter(instance.self(), areal_str{text.data(), text.size()}, tensors), "load_adapter");
  }
  J info() {
    std::string out;
    areal_writer w{AREAL_OFFSET_OF_END(areal_writer, write), &out, [](void* ctx, areal_str chunk) -> areal_status* {
                     static_cast<std::string*>(ctx)->append(chunk.data, chunk.size);
                     return nullptr;
                   }};
    areal::throw_if_status(vt().info(instance.self(), &w), "info");
    return J::parse(out);
  }
};

// log p(output[t] | prompt, output[<t]) at temperature 1, recomputed by the
// training code with `adapter` (null: the base model) on a separate forward.
std::vector<float> recomputed(const std::string& adapter_dir, const std::vector<int32_t>& prompt, const std::vector<int32_t>& out) {
  DecoderModel m = DecoderModel::load(fixture().model_dir, torch::kFloat32);
  if (!adapter_dir.empty()) m.set_lora(std::make_shared<LoraAdapter>(LoraAdapter::load(adapter_dir, m.config())));
  std::vector<int64_t> ids(prompt.begin(), prompt.end());
  ids.insert(ids.end(), out.begin(), out.end());
  torch::NoGradGuard no_grad;
  const auto n = static_cast<int64_t>(ids.size());
  const torch::Tensor lp = m.logprobs(torch::tensor(ids, torch::kInt64), torch::tensor({int64_t{0}, n}, torch::kInt64), 1.0f);
  const torch::Tensor tail = lp.narrow(0, static_cast<int64_t>(prompt.size()), static_cast<int64_t>(out.size())).contiguous();
  return std::vector<float>(tail.data_ptr<float>(), tail.data_ptr<float>() + tail.numel());
}

double max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double d = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) d = std::max(d, static_cast<double>(std::abs(a[i] - b[i])));
  return d;
}

const std::vector<int32_t> kPrompt = {72, 101, 108, 108, 111, 44, 32, 119, 111, 114, 108, 100};

}  // namespace

// Base, adapter a (from the config's folder) and adapter b (loaded from
// memory) in one batch: each request's log-probs are its own model's, and
// each adapter's tokens carry its version.
TEST(LoraServing, MixedBatchComputesEachRequestWithItsOwnAdapter) {
  const Fixture& f = fixture();
  Engine e(J{{"model_path", f.model_dir}, {"max_batch", 8}, {"adapters", {{"a", f.a_dir}}}});
  ASSERT_GE(e.vt().struct_size, AREAL_OFFSET_OF_END(areal_inference_vtable, unload_adapter));
  areal::throw_if_status(e.vt().set_version(e.instance.self(), 3), "set_version");

  // b from memory: its PEFT config and tensors, as an in-process trainer hands them over.
  const DecoderModel m = DecoderModel::load(f.model_dir, torch::kFloat32);
  const LoraAdapter b = LoraAdapter::load(f.b_dir, m.config());
  const J b_config = J::parse(std::ifstream(f.b_dir + "/adapter_config.json"));
  const areal::model::SafetensorsFile file = areal::model::SafetensorsFile::load(f.b_dir + "/adapter_model.safetensors");
  std::vector<areal_str> names;
  std::vector<DLTensor> tensors;
  std::vector<std::vector<int64_t>> shapes;
  for (const auto& t : file.tensors()) shapes.push_back(t.shape);
  for (size_t i = 0; i < file.tensors().size(); ++i) {
    const auto& t = file.tensors()[i];
    names.push_back(areal_str{t.name.data(), t.name.size()});
    DLTensor d{};
    d.data = const_cast<uint8_t*>(file.data(t));
    d.device = {kDLCPU, 0};
    d.ndim = static_cast<int32_t>(shapes[i].size());
    d.dtype = {kDLFloat, 32, 1};
    d.shape = shapes[i].data();
    tensors.push_back(d);
  }
  std::vector<DLTensor*> pointers;
  for (auto& d : tensors) pointers.push_back(&d);
  const areal_tensor_map map{AREAL_OFFSET_OF_END(areal_tensor_map, count), names.data(), pointers.data(), names.size()};
  e.load(J{{"name", "b"}, {"version", 7}, {"config", b_config}}, &map);

  const J info = e.info();
  EXPECT_EQ(info["adapters"], true);
  ASSERT_EQ(info["loaded_adapters"].size(), 2u) << info.dump();
  EXPECT_EQ(info["loaded_adapters"][0]["name"], "a");
  EXPECT_EQ(info["loaded_adapters"][1]["source"], "memory");
  EXPECT_EQ(info["loaded_adapters"][1]["rank"], 2);

  const auto results = e.run_together(kPrompt, {"", "a", "b", "a", ""});
  const std::string dirs[5] = {"", f.a_dir, f.b_dir, f.a_dir, ""};
  const int64_t versions[5] = {3, 0, 7, 0, 3};
  for (size_t i = 0; i < results.size(); ++i) {
    const auto& r = results[i];
    ASSERT_EQ(r.output_ids.size(), 8u) << "request " << i << ": " << r.error_message;
    EXPECT_LT(max_diff(r.logprobs, recomputed(dirs[i], kPrompt, r.output_ids)), 2e-5) << "request " << i;
    for (int64_t v : r.versions) EXPECT_EQ(v, versions[i]) << "request " << i;
  }
  // The adapters change the model: the same tokens under the base score differently.
  EXPECT_GT(max_diff(results[1].logprobs, recomputed("", kPrompt, results[1].output_ids)), 1e-3);
  EXPECT_GT(max_diff(results[2].logprobs, recomputed("", kPrompt, results[2].output_ids)), 1e-3);
}

// Replacing an adapter by name takes effect for new requests with its new
// version; unloading makes the name unknown (NOT_FOUND at submit), and an
// unknown name to unload is NOT_FOUND too.
TEST(LoraServing, ReplaceAndUnloadByName) {
  const Fixture& f = fixture();
  Engine e(J{{"model_path", f.model_dir}, {"adapters", {{"a", f.a_dir}}}});
  e.load(J{{"name", "a"}, {"version", 9}, {"path", f.b_dir}});
  auto r = e.run_together(kPrompt, {"a"});
  ASSERT_EQ(r[0].output_ids.size(), 8u) << r[0].error_message;
  EXPECT_LT(max_diff(r[0].logprobs, recomputed(f.b_dir, kPrompt, r[0].output_ids)), 2e-5);
  EXPECT_EQ(r[0].versions.front(), 9);

  const std::string a = "a";
  areal::StatusPtr st(e.vt().unload_adapter(e.instance.self(), areal_str{a.data(), a.size()}));
  ASSERT_EQ(st, nullptr);
  EXPECT_THROW(e.run_together(kPrompt, {"a"}), areal::Error);
  st.reset(e.vt().unload_adapter(e.instance.self(), areal_str{a.data(), a.size()}));
  ASSERT_NE(st, nullptr);
  EXPECT_EQ(areal::status_code(st.get()), AREAL_CODE_NOT_FOUND);
  EXPECT_TRUE(e.info()["loaded_adapters"].empty());
}

// Bad specs and tensors are refused with the reason and change nothing.
TEST(LoraServing, BadAdaptersAreRefusedAndChangeNothing) {
  const Fixture& f = fixture();
  Engine e(J{{"model_path", f.model_dir}, {"adapters", {{"a", f.a_dir}}}});
  auto refused = [&](const J& spec, const std::string& needle) {
    const std::string text = spec.dump();
    areal::StatusPtr st(e.vt().load_adapter(e.instance.self(), areal_str{text.data(), text.size()}, nullptr));
    ASSERT_NE(st, nullptr) << spec.dump();
    const std::string message(areal::status_message(st.get()));
    EXPECT_NE(message.find(needle), std::string::npos) << message;
  };
  refused(J{{"version", 1}, {"path", f.b_dir}}, "'name'");
  refused(J{{"name", "a"}, {"path", f.b_dir}}, "'version'");
  refused(J{{"name", "a"}, {"version", 1}}, "'path'");
  refused(J{{"name", "a"}, {"version", 1}, {"path", f.model_dir}}, "adapter_config.json");
  refused(J{{"name", "a"}, {"version", 1}, {"config", {{"r", 2}, {"target_modules", {"q_proj"}}}}}, "tensors");
  // "a" is still the first adapter at version 0.
  const J loaded = e.info()["loaded_adapters"];
  ASSERT_EQ(loaded.size(), 1u);
  EXPECT_EQ(loaded[0]["version"], 0);
  EXPECT_EQ(loaded[0]["rank"], 4);
}
