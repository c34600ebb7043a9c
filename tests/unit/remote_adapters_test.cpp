// The remote engine's LoRA adapter bookkeeping (served_adapters.*) and the
// PEFT folder it writes for servers from an adapter handed over in memory
// (peft_folder.*).
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <chrono>
#include <vector>

#include <unistd.h>

#include <dlpack/dlpack.h>
#include <gtest/gtest.h>

#include "areal/sdk.hpp"
#include "core/hf/model_files/safetensors.hpp"
#include "peft_folder.hpp"
#include "served_adapters.hpp"
#include "plugins/gateway/proxy/adapter_names.hpp"

namespace {

namespace fs = std::filesystem;
using areal::remote::RemoteAdapter;
using areal::remote::ServedAdapters;

std::shared_ptr<const RemoteAdapter> adapter(ServedAdapters& s, const std::string& name, int64_t version) {
  auto a = std::make_shared<RemoteAdapter>();
  a->name = name, a->version = version, a->served_name = s.new_served_name(name);
  return a;
}

TEST(ServedAdapters, EveryLoadGetsANewServerName) {
  ServedAdapters s;
  EXPECT_EQ(s.new_served_name("policy"), "policy@1");
  EXPECT_EQ(s.new_served_name("policy"), "policy@2");
  EXPECT_EQ(s.new_served_name("a"), "a@3");
}

TEST(ServedAdapters, RequestsResolveByNameOrToTheDefault) {
  ServedAdapters s;
  std::shared_ptr<const RemoteAdapter> held;
  ASSERT_TRUE(s.resolve("", held));  // nothing loaded: the base model
  EXPECT_EQ(held, nullptr);
  EXPECT_FALSE(s.resolve("a", held));  // an unknown name
  s.install(adapter(s, "a", 0), false);
  s.install(adapter(s, "policy", 3), true);
  ASSERT_TRUE(s.resolve("a", held));
  EXPECT_EQ(held->served_name, "a@1");
  ASSERT_TRUE(s.resolve("", held));
  EXPECT_EQ(held->served_name, "policy@2");
  EXPECT_EQ(held->version, 3);
  // Loaded again without "default": requests naming none go back to the base.
  s.install(adapter(s, "policy", 4), false);
  ASSERT_TRUE(s.resolve("", held));
  EXPECT_EQ(held, nullptr);
}

TEST(ServedAdapters, AReplacedVersionLeavesOnlyWhenNoRequestHoldsIt) {
  ServedAdapters s;
  s.install(adapter(s, "policy", 1), true);
  std::shared_ptr<const RemoteAdapter> in_flight;
  ASSERT_TRUE(s.resolve("", in_flight));
  s.install(adapter(s, "policy", 2), true);
  EXPECT_TRUE(s.take_unused_retired().empty());  // a request still generates with version 1
  // Its next segment moves to version 2; version 1 is then free to unload.
  ASSERT_TRUE(s.resolve("", in_flight));
  EXPECT_EQ(in_flight->version, 2);
  const auto unused = s.take_unused_retired();
  ASSERT_EQ(unused.size(), 1u);
  EXPECT_EQ(unused[0]->served_name, "policy@1");
  EXPECT_TRUE(s.take_unused_retired().empty());  // handed out once
}

TEST(ServedAdapters, AnUnloadedAdapterFinishesTheRequestsThatHaveIt) {
  ServedAdapters s;
  s.install(adapter(s, "a", 0), false);
  std::shared_ptr<const RemoteAdapter> in_flight, fresh;
  ASSERT_TRUE(s.resolve("a", in_flight));
  ASSERT_TRUE(s.uninstall("a"));
  EXPECT_FALSE(s.uninstall("a"));
  EXPECT_FALSE(s.resolve("a", fresh));       // new requests: not loaded
  ASSERT_TRUE(s.resolve("a", in_flight));    // the request in flight keeps it
  EXPECT_EQ(in_flight->served_name, "a@1");
  EXPECT_TRUE(s.take_unused_retired().empty());
  in_flight.reset();
  EXPECT_EQ(s.take_unused_retired().size(), 1u);
  EXPECT_TRUE(s.empty());
}

// A request naming no adapter is bound at submit to the default it starts
// with (the engine resolves later segments by that name): unloading it or
// making another the default does not switch the request mid-way.
TEST(ServedAdapters, ARequestBoundToTheDefaultKeepsItToTheEnd) {
  ServedAdapters s;
  s.install(adapter(s, "policy", 3), true);
  const std::string bound = s.default_name();
  ASSERT_EQ(bound, "policy");
  std::shared_ptr<const RemoteAdapter> in_flight;
  ASSERT_TRUE(s.resolve(bound, in_flight));
  s.install(adapter(s, "other", 0), true);  // another default for new requests
  ASSERT_TRUE(s.resolve(bound, in_flight));
  EXPECT_EQ(in_flight->name, "policy");
  ASSERT_TRUE(s.uninstall("policy"));
  ASSERT_TRUE(s.resolve(bound, in_flight));  // finishes with what it had
  ASSERT_NE(in_flight, nullptr);
  EXPECT_EQ(in_flight->version, 3);
  EXPECT_EQ(s.default_name(), "other");
}

TEST(ServedAdapters, DescribeListsTheCurrentOnes) {
  ServedAdapters s;
  s.install(adapter(s, "policy", 7), true);
  const auto d = s.describe();
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0]["name"], "policy");
  EXPECT_EQ(d[0]["version"], 7);
  EXPECT_EQ(d[0]["served_as"], "policy@1");
  EXPECT_EQ(d[0]["default"], true);
}

struct Tensor2D {
  std::vector<float> values;
  int64_t shape[2];
  DLTensor dl{};
  Tensor2D(int64_t rows, int64_t cols) : values(static_cast<size_t>(rows * cols)), shape{rows, cols} {
    for (size_t i = 0; i < values.size(); ++i) values[i] = 0.25f * static_cast<float>(i) - 1.0f;
    dl.data = values.data(), dl.device = {kDLCPU, 0}, dl.ndim = 2, dl.dtype = {kDLFloat, 32, 1}, dl.shape = shape;
  }
};

TEST(PeftFolder, WritesConfigAndTensorsAsPeftReadsThem) {
  const fs::path dir = fs::temp_directory_path() / ("areal-peft-folder-" + std::to_string(::getpid()));
  Tensor2D a(2, 3), b(4, 2);
  const std::vector<areal_str> names = {areal::sdk::str("base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight"),
                                        areal::sdk::str("base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight")};
  DLTensor* tensors[] = {&a.dl, &b.dl};
  const areal_tensor_map map{sizeof(areal_tensor_map), names.data(), tensors, 2};
  areal::remote::write_peft_folder(dir.string(), {{"r", 2}, {"lora_alpha", 4}, {"target_modules", {"q_proj"}}}, map);
  const auto config = nlohmann::json::parse(std::ifstream(dir / "adapter_config.json"));
  EXPECT_EQ(config["peft_type"], "LORA");
  EXPECT_EQ(config["r"], 2);
  const auto file = areal::model::SafetensorsFile::load((dir / "adapter_model.safetensors").string());
  const auto* t = file.find("base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->shape, (std::vector<int64_t>{4, 2}));
  EXPECT_EQ(reinterpret_cast<const float*>(file.data(*t))[5], b.values[5]);
  EXPECT_FALSE(fs::exists(dir.string() + ".partial"));
  fs::remove_all(dir);
}

TEST(PeftFolder, RefusesWhatIsNotALoraWeightAndWritesNothing) {
  const fs::path dir = fs::temp_directory_path() / ("areal-peft-refused-" + std::to_string(::getpid()));
  Tensor2D a(2, 3);
  std::vector<areal_str> names = {areal::sdk::str("model.layers.0.self_attn.q_proj.weight")};
  DLTensor* tensors[] = {&a.dl};
  const areal_tensor_map map{sizeof(areal_tensor_map), names.data(), tensors, 1};
  try {
    areal::remote::write_peft_folder(dir.string(), {{"r", 2}}, map);
    FAIL() << "a base weight was written as an adapter";
  } catch (const areal::sdk::Error& e) {
    EXPECT_EQ(e.code(), AREAL_CODE_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("not a LoRA weight"), std::string::npos) << e.what();
  }
  a.dl.ndim = 1;  // and a tensor of the wrong shape
  names[0] = areal::sdk::str("x.lora_A.weight");
  EXPECT_THROW(areal::remote::write_peft_folder(dir.string(), {{"r", 2}}, map), areal::sdk::Error);
  EXPECT_FALSE(fs::exists(dir));
}

}  // namespace

// The gateway's view of the backend's adapters: a name read once stays
// valid only while the backend still lists it.
namespace {
std::string listed_adapters = R"({"adapters": true, "loaded_adapters": [{"name": "a"}]})";
areal_status* info_listing(void*, const areal_writer* out) { return out->write(out->ctx, areal::sdk::str(listed_adapters)); }
areal_status* no_load(void*, areal_str, const areal_tensor_map*) { return nullptr; }
areal_status* no_unload(void*, areal_str) { return nullptr; }
}  // namespace

TEST(AdapterNames, AnAdapterUnloadedSinceFallsBackToTheBaseModel) {
  areal_inference_vtable vt{};
  vt.struct_size = AREAL_OFFSET_OF_END(areal_inference_vtable, unload_adapter);
  vt.info = info_listing, vt.load_adapter = no_load, vt.unload_adapter = no_unload;
  areal_inference_ref ref{AREAL_OFFSET_OF_END(areal_inference_ref, self), &vt, nullptr};
  areal::proxy::AdapterNames names(&ref);
  EXPECT_EQ(names.adapter_for("a"), "a");
  EXPECT_EQ(names.adapter_for("gpt-4o"), "");
  listed_adapters = R"({"adapters": true, "loaded_adapters": []})";
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));  // the list is read at most once a second
  EXPECT_EQ(names.adapter_for("a"), "") << "an unloaded adapter is still chosen";
}
