// GPT-OSS in the shared model served by the local engine (issue #35): the
// engine's KV-cache decoding with attention sinks and a sliding window
// gives the log-probs and expert routing of one training forward over the
// same tokens, past the window, for requests of different lengths decoded
// together. transformers checks the forward itself, MXFP4 loading included
// (tests/parity/logprobs_transformers.sh).
#include <chrono>
#include <filesystem>
#include <fstream>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>
#include <algorithm>
#include <tuple>

#include <gtest/gtest.h>

#include "core/hf/model_files/init_model.hpp"
#include "core/plugin_host/error.hpp"
#include "core/plugin_host/generation.hpp"
#include "decoder_model.hpp"
#include "local_engine.hpp"
#include "lora_adapter.hpp"
#include "model_dir_once.hpp"
#include "test_temp_dir.hpp"

using areal::torch_model::DecoderModel;
using areal::torch_model::MoeRouting;

namespace {

std::string tiny_gpt_oss_dir() {
  areal::model::InitModelOptions o;
  o.family = "gpt_oss", o.preset = "tiny-hd32", o.tokenizer_dir = "bytes", o.seed = 31;
  o.initializer_range = 0.2;  // sinks, routers and attention far from uniform
  return areal::testing::model_dir_once("gpt-oss-tiny-hd32", o);
}

}  // namespace

TEST(GptOss, ThePresetSlidesOnEvenLayersWithSinksAndFusedExperts) {
  const DecoderModel m = DecoderModel::load(tiny_gpt_oss_dir(), torch::kFloat32);
  const auto& c = m.config();
  EXPECT_EQ(c.family, "gpt_oss");
  EXPECT_EQ(c.attention_window(0), 16);
  EXPECT_EQ(c.attention_window(1), 0);
  EXPECT_TRUE(c.attention_sinks && c.fused_experts && c.qkv_bias && c.o_bias);
  EXPECT_EQ(m.p("model.layers.1.mlp.experts.gate_up_proj").sizes(), (std::vector<int64_t>{8, 64, 64}));
  EXPECT_EQ(m.p("model.layers.1.mlp.experts.down_proj").sizes(), (std::vector<int64_t>{8, 32, 64}));
  EXPECT_EQ(m.p("model.layers.0.self_attn.sinks").sizes(), (std::vector<int64_t>{2}));
  EXPECT_EQ(c.moe_layer_count(), 2);
}

TEST(GptOss, TheLocalEngineDecodesPastTheWindowWithTheTrainingForwardsLogprobsAndRouting) {
  const std::string dir = tiny_gpt_oss_dir();
  areal::testing::LocalEngine engine(nlohmann::json{{"model_path", dir}, {"dtype", "float64"}, {"max_batch", 4}});
  const DecoderModel model = DecoderModel::load(dir, torch::kFloat64);
  // Prompts shorter and longer than the 16-key window; 28 new tokens each,
  // decoded in one batch, so every request's queries cross the window.
  std::vector<std::vector<int32_t>> prompts = {{5, 9, 33, 2, 71}, {100, 4}, {7, 7, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24}};
  const auto sinks = engine.submit_recording_routing(prompts, 28);
  for (size_t i = 0; i < prompts.size(); ++i) {
    ASSERT_TRUE(sinks[i]->wait(std::chrono::seconds(60)));
    const auto out = sinks[i]->result();
    ASSERT_EQ(out.output_ids.size(), 28u) << out.error_message;
    std::vector<int64_t> seq(prompts[i].begin(), prompts[i].end());
    seq.insert(seq.end(), out.output_ids.begin(), out.output_ids.end());
    const auto n = static_cast<int64_t>(seq.size());
    MoeRouting r;
    r.record = true;
    torch::NoGradGuard no_grad;
    const torch::Tensor want = model.logprobs(torch::tensor(seq, torch::kInt64), torch::tensor(std::vector<int64_t>{0, n}, torch::kInt64), 1.0f, false, &r);
    double worst = 0;
    for (size_t t = 0; t < out.output_ids.size(); ++t)
      worst = std::max(worst, std::abs(want[static_cast<int64_t>(prompts[i].size() + t)].item<double>() - out.logprobs[t]));
    EXPECT_LE(worst, 1e-5) << "request " << i;  // the engine reports float32 log-probs
    // Routing: every position but the last sampled token's, 2 layers, top 2.
    ASSERT_EQ(out.routing_layers, 2u);
    ASSERT_EQ(out.routing_top_k, 2u);
    ASSERT_EQ(out.routing_positions, seq.size() - 1);
    const torch::Tensor chosen = std::get<0>(torch::stack(r.chosen, 1).narrow(0, 0, n - 1).sort(-1));  // [positions, layers, 2]
    const torch::Tensor got = std::get<0>(torch::tensor(std::vector<int64_t>(out.routing.begin(), out.routing.end())).view({-1, 2, 2}).sort(-1));
    EXPECT_TRUE(torch::equal(got, chosen)) << "request " << i;
  }
}

// Training: gradient checkpointing recomputes each layer (sinks, window,
// fused experts) to the same loss and gradients, the balancing loss
// included; every weight gets a gradient, sinks and expert biases too.
TEST(GptOss, GradientCheckpointingGivesTheSameGradientsToEveryWeight) {
  torch::manual_seed(3);
  const torch::Tensor ids = torch::randint(0, 300, {60}, torch::kInt64), cu = torch::tensor(std::vector<int64_t>{0, 13, 60}, torch::kInt64);
  std::vector<torch::Tensor> grads[2];
  double values[2];
  std::vector<std::string> names;
  for (int checkpoint = 0; checkpoint < 2; ++checkpoint) {
    DecoderModel m = DecoderModel::load(tiny_gpt_oss_dir(), torch::kFloat64);
    MoeRouting r;
    r.keep_logits = r.record = true;
    const torch::Tensor lp = m.logprobs(ids, cu, 1.0f, checkpoint == 1, &r);
    ASSERT_EQ(r.logits.size(), 2u);
    const auto& c = m.config();
    const torch::Tensor loss = -lp.sum() + 0.1 * areal::torch_model::load_balancing_loss(r.logits, c.num_experts, c.num_experts_per_tok);
    values[checkpoint] = loss.item<double>();
    loss.backward();
    names.clear();
    for (const auto& w : c.weights()) names.push_back(w.name);
    for (const auto& t : m.parameters()) grads[checkpoint].push_back(t.grad().defined() ? t.grad().clone() : torch::zeros_like(t));
  }
  EXPECT_DOUBLE_EQ(values[0], values[1]);
  ASSERT_EQ(grads[0].size(), grads[1].size());
  for (size_t i = 0; i < grads[0].size(); ++i) {
    EXPECT_LT((grads[0][i] - grads[1][i]).abs().max().item<double>(), 1e-12) << names[i];
    EXPECT_GT(grads[1][i].abs().sum().item<double>(), 0) << names[i] << " got no gradient";
  }
}

TEST(GptOss, AnMxfp4ConfigWithoutItsBlocksOrWithAnotherQuantizationIsRefused) {
  // The tiny model's folder, its config.json saying MXFP4: the plain expert
  // tensors are not what it asks for, and the error names the missing blocks.
  const std::string dir = areal::testing::test_temp_dir("gpt-oss-mxfp4-missing");
  std::filesystem::create_directories(dir);
  std::filesystem::copy(tiny_gpt_oss_dir(), dir, std::filesystem::copy_options::overwrite_existing | std::filesystem::copy_options::recursive);
  nlohmann::json j = nlohmann::json::parse(std::ifstream(dir + "/config.json"));
  j["quantization_config"] = {{"quant_method", "mxfp4"}};
  std::ofstream(dir + "/config.json") << j.dump();
  try {
    DecoderModel::load(dir, torch::kFloat32);
    FAIL() << "an MXFP4 config over plain tensors was loaded";
  } catch (const areal::Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.layers.0.mlp.experts.gate_up_proj_blocks"), std::string::npos) << e.what();
  }
  j["quantization_config"] = {{"quant_method", "gptq"}};
  try {
    areal::model::ModelConfig::from_hf_json(j, "config.json");
    FAIL() << "gptq was accepted";
  } catch (const areal::Error& e) {
    EXPECT_NE(std::string(e.what()).find("'gptq' is not supported"), std::string::npos) << e.what();
  }
}

TEST(GptOss, LoraOnTheExpertsIsRefusedAndOnAttentionWorks) {
  const auto c = areal::model::preset("gpt_oss", "tiny", 320);
  const auto experts = areal::torch_model::LoraConfig::from_json(nlohmann::json{{"rank", 4}, {"target_modules", {"down_proj"}}}, "lora");
  EXPECT_THROW(areal::torch_model::LoraAdapter::init(experts, c, 1, torch::kCPU, torch::kFloat32), areal::Error);
  // all-linear (the default) is the attention on a model whose every MLP is experts.
  const auto all = areal::torch_model::LoraConfig::from_json(nlohmann::json{{"rank", 4}}, "lora");
  const auto adapter = areal::torch_model::LoraAdapter::init(all, c, 1, torch::kCPU, torch::kFloat32);
  EXPECT_TRUE(adapter.config().targets[static_cast<size_t>(areal::torch_model::LoraModule::kO)]);
  EXPECT_FALSE(adapter.config().targets[static_cast<size_t>(areal::torch_model::LoraModule::kUp)]);
  const auto attn = areal::torch_model::LoraConfig::from_json(nlohmann::json{{"rank", 4}, {"target_modules", {"q_proj", "o_proj"}}}, "lora");
  EXPECT_NO_THROW(areal::torch_model::LoraAdapter::init(attn, c, 1, torch::kCPU, torch::kFloat32));
}
