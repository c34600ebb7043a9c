// safetensors and HF model configs, without libtorch.
#include <filesystem>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/plugin_host/error.hpp"
#include "core/hf/model_files/model_config.hpp"
#include "core/hf/model_files/safetensors.hpp"
#include "test_temp_dir.hpp"

using namespace areal::model;
namespace fs = std::filesystem;

namespace {

fs::path temp(const std::string& name) {
  fs::path p = fs::path(areal::testing::test_temp_dir("model-test")) / name;
  fs::create_directories(p.parent_path());
  return p;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void spit(const fs::path& p, const std::string& bytes) { std::ofstream(p, std::ios::binary) << bytes; }

std::string error_of(const fs::path& p) {
  try {
    SafetensorsFile::load(p.string());
  } catch (const areal::Error& e) {
    return e.what();
  }
  return "<loaded>";
}

// A raw file from a header string and data bytes.
std::string raw_file(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((header.size() >> (8 * i)) & 0xFF);
  return out + header + data;
}

}  // namespace

TEST(Safetensors, WriteLoadRoundTripAndByteIdenticalResave) {
  const std::vector<float> a = {1.5f, -2.0f, 0.25f, 8.0f, 0.0f, -0.5f};
  const std::vector<uint16_t> b = {float_to_bf16(1.0f), float_to_bf16(-3.5f)};
  SafetensorsWriter w;
  w.add("layer.weight", DType::kF32, {2, 3}, a.data(), a.size() * 4);
  w.add("layer.bias", DType::kBF16, {2}, b.data(), b.size() * 2);
  const fs::path p = temp("rt.safetensors");
  w.save(p.string());
  const std::string bytes = slurp(p);
  EXPECT_EQ((8 + static_cast<unsigned char>(bytes[0])) % 8, 0u) << "the data section starts 8-byte aligned";
  auto f = SafetensorsFile::load(p.string());
  ASSERT_EQ(f.tensors().size(), 2u);
  EXPECT_EQ(f.metadata()["format"], "pt");
  const TensorInfo* t = f.find("layer.weight");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(std::memcmp(f.data(*t), a.data(), 24), 0);
  EXPECT_EQ(bf16_to_float(reinterpret_cast<const uint16_t*>(f.data(*f.find("layer.bias")))[1]), -3.5f);
  const fs::path again = temp("rt2.safetensors");
  f.save(again.string());
  EXPECT_EQ(slurp(again), bytes);
}

TEST(Safetensors, CorruptFilesAreRefusedWithTheReason) {
  const std::string ok_header = R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"abc", "too short"},
      {std::string("\xff\xff\xff\xff\xff\xff\x00\x00", 8) + "{}", "header length"},
      {raw_file("{not json", ""), "header is not valid JSON"},
      {raw_file(ok_header, std::string(4, '\0')), "data_offsets outside the data section"},
      {raw_file(R"({"t":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", std::string(8, '\0')), "need 12"},
      {raw_file(R"({"t":{"dtype":"Q4","shape":[2],"data_offsets":[0,8]}})", std::string(8, '\0')), "unsupported safetensors dtype 'Q4'"},
      {raw_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[2,6]}})", std::string(8, '\0')), "overlap or gap"},
      {raw_file(ok_header, std::string(12, '\0')), "bytes no tensor owns"},
      {raw_file(R"({"t":{"dtype":"F32","shape":[2]}})", ""), "needs dtype, shape and data_offsets"},
      // 2^62 x 4 bytes wraps to 0: a shape that lies about its size.
      {raw_file(R"({"t":{"dtype":"F32","shape":[4611686018427387904],"data_offsets":[0,0]}})", ""), "overflows"},
      {raw_file(R"({"t":{"dtype":"U8","shape":[4294967296,4294967296],"data_offsets":[0,0]}})", ""), "overflows"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const fs::path p = temp("bad" + std::to_string(i) + ".safetensors");
    spit(p, cases[i].first);
    const std::string e = error_of(p);
    EXPECT_EQ(e.rfind(p.string() + ": ", 0), 0u) << "errors name the file: " << e;
    EXPECT_NE(e.find(cases[i].second), std::string::npos) << "case " << i << ": " << e;
  }
  EXPECT_NE(error_of("/nonexistent/x.safetensors").find("cannot read"), std::string::npos);
}

TEST(Safetensors, HalfPrecisionConversionsRoundToNearestEven) {
  EXPECT_EQ(float_to_bf16(1.0f), 0x3F80);
  EXPECT_EQ(float_to_bf16(-2.0f), 0xC000);
  EXPECT_EQ(float_to_bf16(1.00390625f), 0x3F80);  // exactly halfway: rounds to even
  EXPECT_EQ(float_to_bf16(1.01171875f), 0x3F82);
  EXPECT_EQ(float_to_f16(1.0f), 0x3C00);
  EXPECT_EQ(float_to_f16(65504.0f), 0x7BFF);
  EXPECT_EQ(float_to_f16(1e6f), 0x7C00);  // overflow -> inf
  EXPECT_EQ(float_to_f16(5.960464477539063e-08f), 0x0001);  // smallest subnormal
  for (float v : {0.1f, -7.25f, 3.0e-5f, 1234.5f}) {
    EXPECT_NEAR(bf16_to_float(float_to_bf16(v)), v, std::fabs(v) * 0.008f);
    EXPECT_NEAR(f16_to_float(float_to_f16(v)), v, std::fabs(v) * 0.001f + 1e-7f);
  }
}

TEST(Checkpoint, ShardedIndexIsFollowedAndCheckedAgainstTheConfig) {
  ModelConfig c = preset("qwen2", "tiny", 100);
  c.num_hidden_layers = 1;
  const fs::path dir = temp("ckpt");
  fs::create_directories(dir);
  SafetensorsWriter s1, s2;
  nlohmann::json map;
  bool first = true;
  for (const auto& w : c.weights()) {
    size_t n = 1;
    for (int64_t d : w.shape) n *= static_cast<size_t>(d);
    std::vector<float> zeros(n);
    (first ? s1 : s2).add(w.name, DType::kF32, w.shape, zeros.data(), n * 4);
    map[w.name] = first ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
    first = false;
  }
  s1.save((dir / "model-00001-of-00002.safetensors").string());
  s2.save((dir / "model-00002-of-00002.safetensors").string());
  std::ofstream(dir / "model.safetensors.index.json") << nlohmann::json{{"metadata", {{"total_size", 0}}}, {"weight_map", map}}.dump();
  auto ck = Checkpoint::load(dir.string());
  EXPECT_EQ(ck.shard_count(), 2u);
  EXPECT_NO_THROW(c.check(ck));
  ModelConfig wider = c;
  wider.hidden_size = 128;
  try {
    wider.check(ck);
    FAIL();
  } catch (const areal::Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.embed_tokens.weight' has shape [128, 64]"), std::string::npos) << e.what();
  }
  ModelConfig deeper = c;
  deeper.num_hidden_layers = 2;
  EXPECT_THROW(deeper.check(ck), areal::Error);  // model.layers.1.* missing
}

// A tied model whose checkpoint also has lm_head.weight: a copy of the
// embeddings loads; a different matrix (HF 5 keeps it untied) is refused.
TEST(Checkpoint, ATiedModelsDifferentHeadIsRefusedNotReplaced) {
  ModelConfig c = preset("qwen3", "tiny", 100);
  c.num_hidden_layers = 1;
  ASSERT_TRUE(c.tie_word_embeddings);
  for (const bool differ : {false, true}) {
    const fs::path dir = temp(differ ? "tied-differ" : "tied-copy");
    fs::create_directories(dir);
    SafetensorsWriter w;
    std::vector<float> embed;
    for (const auto& t : c.weights()) {
      size_t n = 1;
      for (int64_t d : t.shape) n *= static_cast<size_t>(d);
      std::vector<float> v(n, 0.5f);
      if (t.name == "model.embed_tokens.weight") embed = v;
      w.add(t.name, DType::kF32, t.shape, v.data(), n * 4);
    }
    std::vector<float> head = embed;
    if (differ) head[3] = 2.0f;
    w.add("lm_head.weight", DType::kF32, {c.vocab_size, c.hidden_size}, head.data(), head.size() * 4);
    w.save((dir / "model.safetensors").string());
    const auto ck = Checkpoint::load(dir.string());
    if (differ) EXPECT_THROW(c.check(ck), areal::Error);
    else EXPECT_NO_THROW(c.check(ck));
  }
}

TEST(ModelConfig, HfJsonRoundTripAndValidation) {
  for (const char* family : {"qwen3", "qwen2", "llama3"}) {
    const ModelConfig c = preset(family, "small", 1000);
    const ModelConfig back = ModelConfig::from_hf_json(c.to_hf_json(), "config.json");
    EXPECT_EQ(back.family, family);
    EXPECT_EQ(back.vocab_size, 1024);
    EXPECT_EQ(back.head_dim, c.head_dim);
    EXPECT_EQ(back.qk_norm, std::string(family) == "qwen3");
    EXPECT_EQ(back.qkv_bias, std::string(family) == "qwen2");
    EXPECT_EQ(back.weights().size(), c.weights().size());
  }
  EXPECT_THROW(ModelConfig::from_hf_json({{"model_type", "gpt2"}}, "c"), areal::Error);
  EXPECT_THROW(ModelConfig::from_hf_json({{"model_type", "llama"}, {"vocab_size", 10}}, "c"), areal::Error);
  auto j = preset("llama3", "tiny", 10).to_hf_json();
  j["num_key_value_heads"] = 3;  // 4 heads do not divide into 3 groups
  EXPECT_THROW(ModelConfig::from_hf_json(j, "c"), areal::Error);
  // What the model code does not compute is refused by name, never computed otherwise.
  auto gelu = preset("qwen2", "tiny", 200).to_hf_json();
  gelu["hidden_act"] = "gelu_pytorch_tanh";
  EXPECT_THROW(ModelConfig::from_hf_json(gelu, "c"), areal::Error);
  auto sliding = preset("qwen3", "tiny", 200).to_hf_json();
  sliding["use_sliding_window"] = true;
  EXPECT_THROW(ModelConfig::from_hf_json(sliding, "c"), areal::Error);
  // Dynamic NTK rescales by the batch's longest position in transformers: refused at load, not at the first forward.
  auto dynamic = preset("llama3", "tiny", 200).to_hf_json();
  dynamic["rope_scaling"] = {{"rope_type", "dynamic"}, {"factor", 2.0}};
  EXPECT_THROW(ModelConfig::from_hf_json(dynamic, "c"), areal::Error);
  // HF's max_position_embeddings defaults per family when the key is absent.
  for (const auto& [family, want] : std::vector<std::pair<std::string, int64_t>>{{"llama3", 2048}, {"qwen3", 32768}, {"gpt_oss", 131072}}) {
    auto j = preset(family, "tiny", 200).to_hf_json();
    j.erase("max_position_embeddings");
    EXPECT_EQ(ModelConfig::from_hf_json(j, "c").max_position_embeddings, want) << family;
  }
  // The balancing loss is HF's only with output_router_logits (gpt-oss ships 0.9 and false).
  auto oss = preset("gpt_oss", "20b", 200).to_hf_json();
  EXPECT_EQ(oss["output_router_logits"], false);
  EXPECT_EQ(oss["router_aux_loss_coef"], 0.9);
  EXPECT_FALSE(ModelConfig::from_hf_json(oss, "c").output_router_logits);
  oss["output_router_logits"] = true;
  EXPECT_TRUE(ModelConfig::from_hf_json(oss, "c").output_router_logits);
  EXPECT_TRUE(ModelConfig::from_hf_json(preset("qwen3_moe", "tiny", 200).to_hf_json(), "c").output_router_logits);
  // Llama 3.1 lists three end ids: every one is kept, and written back.
  auto listed = preset("llama3", "tiny", 200).to_hf_json();
  listed["eos_token_id"] = {128, 130, 131};
  const ModelConfig l = ModelConfig::from_hf_json(listed, "c");
  EXPECT_EQ(l.eos_token_id, 128);
  EXPECT_EQ(l.eos_token_ids, (std::vector<int64_t>{128, 130, 131}));
  EXPECT_EQ(l.to_hf_json()["eos_token_id"], listed["eos_token_id"]);
  listed["eos_token_id"] = {128, "x"};
  EXPECT_THROW(ModelConfig::from_hf_json(listed, "c"), areal::Error);
}
