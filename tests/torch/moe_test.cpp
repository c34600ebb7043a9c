// Mixture-of-experts layers of the decoder model (Qwen3-MoE, issue #35):
// routing replay, gradient checkpointing through the routers, the
// load-balancing loss, and the refusal of LoRA on experts. transformers
// checks the forward, the routing and the loss itself
// (tests/parity/logprobs_transformers.sh).
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>
#include <memory>
#include <chrono>
#include <algorithm>

#include <gtest/gtest.h>

#include "core/hf/model_files/init_model.hpp"
#include "core/plugin_host/error.hpp"
#include "core/plugin_host/generation.hpp"
#include "decoder_model.hpp"
#include "local_engine.hpp"
#include "lora_adapter.hpp"
#include "test_temp_dir.hpp"

using areal::torch_model::DecoderModel;
using areal::torch_model::MoeRouting;
namespace fs = std::filesystem;

namespace {

std::string tiny_moe_dir(const std::string& preset) {
  const std::string dir = areal::testing::test_temp_dir("moe-" + preset);
  if (!fs::exists(dir + "/config.json")) {
    areal::model::InitModelOptions o;
    o.family = "qwen3_moe", o.preset = preset, o.tokenizer_dir = "bytes", o.out_dir = dir, o.seed = 11;
    o.initializer_range = 0.2;  // routers far from uniform
    areal::model::init_model(o);
  }
  return dir;
}

// float64, so recompute and replay must agree to rounding.
DecoderModel tiny_moe(const std::string& preset) { return DecoderModel::load(tiny_moe_dir(preset), torch::kFloat64); }

struct Batch {
  torch::Tensor ids, cu;
};

Batch batch() {
  torch::manual_seed(3);
  return {torch::randint(0, 300, {40}, torch::kInt64), torch::tensor(std::vector<int64_t>{0, 13, 40}, torch::kInt64)};
}

// The router weights of every MoE layer moved by `scale` * noise: another policy's routers.
void perturb_routers(DecoderModel& m, double scale) {
  torch::NoGradGuard no_grad;
  torch::manual_seed(5);
  for (auto& [name, t] : m.named_parameters())
    if (name.find("mlp.gate.weight") != std::string::npos) const_cast<torch::Tensor&>(t).add_(torch::randn_like(t) * scale);
}

TEST(Moe, ThePresetsMixDenseAndExpertLayersAsConfigured) {
  const DecoderModel all = tiny_moe("tiny"), mixed = tiny_moe("tiny-hd32");
  EXPECT_EQ(all.config().moe_layer_count(), 2);
  EXPECT_EQ(mixed.config().moe_layer_count(), 1);
  EXPECT_FALSE(mixed.config().is_moe_layer(0));
  EXPECT_TRUE(mixed.config().is_moe_layer(1));
}

TEST(Moe, RecordsTopKExpertsPerLayerAndReplayingThemChangesNothing) {
  const DecoderModel m = tiny_moe("tiny");
  const Batch b = batch();
  MoeRouting rec;
  rec.record = true;
  const torch::Tensor lp = m.logprobs(b.ids, b.cu, 1.0f, false, &rec);
  ASSERT_EQ(rec.chosen.size(), 2u);
  EXPECT_EQ(rec.chosen[0].sizes(), (std::vector<int64_t>{40, 2}));
  MoeRouting replay;
  replay.replay = torch::stack(rec.chosen, 1);  // [T, layers, k]
  EXPECT_TRUE(torch::equal(m.logprobs(b.ids, b.cu, 1.0f, false, &replay), lp));
}

TEST(Moe, ReplayMakesAnotherRouterUseTheRecordedExperts) {
  const DecoderModel rollout = tiny_moe("tiny");
  DecoderModel trainer = tiny_moe("tiny");
  perturb_routers(trainer, 0.5);
  const Batch b = batch();
  MoeRouting recorded, own, replayed;
  recorded.record = own.record = replayed.record = true;
  const torch::Tensor lp_rollout = rollout.logprobs(b.ids, b.cu, 1.0f, false, &recorded);
  const torch::Tensor lp_own = trainer.logprobs(b.ids, b.cu, 1.0f, false, &own);
  replayed.replay = torch::stack(recorded.chosen, 1);
  const torch::Tensor lp_replayed = trainer.logprobs(b.ids, b.cu, 1.0f, false, &replayed);
  // The test means something only if the perturbed routers choose differently.
  const torch::Tensor own_sets = std::get<0>(torch::stack(own.chosen, 1).sort(-1)), rollout_sets = std::get<0>(torch::stack(recorded.chosen, 1).sort(-1));
  const int64_t differ = (own_sets != rollout_sets).any(-1).sum().item<int64_t>();
  ASSERT_GT(differ, 0) << "the perturbed routers chose the rollout's experts everywhere";
  for (size_t l = 0; l < recorded.chosen.size(); ++l) EXPECT_TRUE(torch::equal(replayed.chosen[l], recorded.chosen[l]));
  // Replay brings the trainer's log-probs closer to the rollout's: only the routing weights still differ.
  const double off = (lp_own - lp_rollout).abs().max().item<double>(), replay_off = (lp_replayed - lp_rollout).abs().max().item<double>();
  EXPECT_LT(replay_off, off) << "own routing " << off << ", replayed " << replay_off;
}

TEST(Moe, GradientCheckpointingRoutesTheSameAndPassesTheBalancingLossGradient) {
  const Batch b = batch();
  std::vector<torch::Tensor> grads[2];
  double values[2];
  for (int checkpoint = 0; checkpoint < 2; ++checkpoint) {
    DecoderModel m = tiny_moe("tiny-hd32");
    MoeRouting r;
    r.keep_logits = r.record = true;
    const torch::Tensor lp = m.logprobs(b.ids, b.cu, 1.0f, checkpoint == 1, &r);
    ASSERT_EQ(r.logits.size(), 1u);
    const auto& c = m.config();
    const torch::Tensor aux = areal::torch_model::load_balancing_loss(r.logits, c.num_experts, c.num_experts_per_tok);
    const torch::Tensor loss = -lp.sum() + 0.1 * aux;
    values[checkpoint] = loss.item<double>();
    loss.backward();
    for (const auto& t : m.parameters()) grads[checkpoint].push_back(t.grad().defined() ? t.grad().clone() : torch::zeros_like(t));
  }
  EXPECT_DOUBLE_EQ(values[0], values[1]);
  ASSERT_EQ(grads[0].size(), grads[1].size());
  double worst = 0;
  for (size_t i = 0; i < grads[0].size(); ++i) worst = std::max(worst, (grads[0][i] - grads[1][i]).abs().max().item<double>());
  EXPECT_LT(worst, 1e-12);
  // The router gets a gradient from the balancing loss (and from the tokens).
  const DecoderModel shape = tiny_moe("tiny-hd32");
  size_t gate = 0;
  for (const auto& w : shape.config().weights()) {
    if (w.name == "model.layers.1.mlp.gate.weight") break;
    ++gate;
  }
  EXPECT_GT(grads[1][gate].abs().sum().item<double>(), 0);
}

TEST(Moe, BalancingLossIsTopKWhenRoutingIsUniform) {
  // Equal logits: P_e = 1/E for every expert; the fractions f_e sum to k
  // whichever experts the ties pick, so E * sum_e f_e P_e = k.
  const torch::Tensor flat = torch::zeros({64, 8}, torch::kFloat64);
  EXPECT_NEAR(areal::torch_model::load_balancing_loss({flat}, 8, 2).item<double>(), 2.0, 1e-12);
}

// ABI 1.7: the local engine reports, for a request with record_routing, the
// experts of every position it computed (prompt in prefill, each fed-back
// token in decoding); they must be the experts a training forward over
// prompt + output chooses (float64 engine and model: no near-tie flips).
TEST(Moe, TheLocalEngineRecordsTheRoutingATrainingForwardReplays) {
  const std::string dir = tiny_moe_dir("tiny-hd32");
  areal::testing::LocalEngine engine(nlohmann::json{{"model_path", dir}, {"dtype", "float64"}, {"max_batch", 4}});
  std::string info;
  areal_writer w{AREAL_OFFSET_OF_END(areal_writer, write), &info, [](void* ctx, areal_str chunk) -> areal_status* {
                   static_cast<std::string*>(ctx)->append(chunk.data, chunk.size);
                   return nullptr;
                 }};
  areal::throw_if_status(engine.vt().info(engine.instance.self(), &w), "info");
  EXPECT_TRUE(nlohmann::json::parse(info).value("routing", false)) << info;
  const DecoderModel model = DecoderModel::load(dir, torch::kFloat64);
  std::vector<std::vector<int32_t>> prompts = {{5, 9, 33, 2, 71}, {100, 4}, {7, 7, 7, 8, 9, 10, 11, 12}};
  std::vector<std::unique_ptr<areal::CollectingSink>> sinks;
  areal_sampling_params s{};
  s.struct_size = AREAL_OFFSET_OF_END(areal_sampling_params, json_schema);
  s.temperature = 1.0f, s.top_p = 1.0f, s.max_new_tokens = 12, s.ignore_eos = 1;
  for (auto& p : prompts) {
    areal_gen_request r{};
    r.struct_size = AREAL_OFFSET_OF_END(areal_gen_request, record_routing);
    r.request_id = areal::next_request_id();
    r.input_ids = p.data(), r.input_ids_count = p.size(), r.sampling = &s;
    r.record_routing = 1;
    sinks.push_back(std::make_unique<areal::CollectingSink>());
    areal::throw_if_status(engine.vt().submit(engine.instance.self(), &r, sinks.back()->sink()), "submit");
  }
  for (size_t i = 0; i < prompts.size(); ++i) {
    ASSERT_TRUE(sinks[i]->wait(std::chrono::seconds(60)));
    const auto out = sinks[i]->result();
    ASSERT_EQ(out.on_routing_calls, 1);
    ASSERT_EQ(out.output_ids.size(), 12u);
    // Every position but the last sampled token's, one MoE layer, top 2.
    const size_t positions = prompts[i].size() + out.output_ids.size() - 1;
    ASSERT_EQ(out.routing_positions, positions);
    ASSERT_EQ(out.routing_layers, 1u);
    ASSERT_EQ(out.routing_top_k, 2u);
    EXPECT_EQ(out.routing_experts, 8u);
    std::vector<int64_t> seq(prompts[i].begin(), prompts[i].end());
    seq.insert(seq.end(), out.output_ids.begin(), out.output_ids.end() - 1);
    MoeRouting r;
    r.record = true;
    torch::NoGradGuard no_grad;
    model.hidden(torch::tensor(seq, torch::kInt64), torch::tensor(std::vector<int64_t>{0, static_cast<int64_t>(seq.size())}, torch::kInt64), false, &r);
    const torch::Tensor want = std::get<0>(r.chosen[0].sort(-1));  // [positions, 2]
    const torch::Tensor got = std::get<0>(torch::tensor(std::vector<int64_t>(out.routing.begin(), out.routing.end())).view({-1, 2}).sort(-1));
    EXPECT_TRUE(torch::equal(got, want)) << "request " << i;
  }
}

TEST(Moe, LoraOnExpertsIsRefusedByName) {
  const DecoderModel m = tiny_moe("tiny");
  try {
    areal::torch_model::LoraAdapter::init(areal::torch_model::LoraConfig::from_json(nlohmann::json::object(), "lora"), m.config(), 0);
    FAIL() << "all-linear LoRA on a MoE model was accepted";
  } catch (const areal::Error& e) {
    EXPECT_EQ(e.code(), AREAL_CODE_UNSUPPORTED);
    EXPECT_NE(std::string(e.what()).find("q_proj, k_proj, v_proj, o_proj"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(areal::torch_model::LoraAdapter::init(
      areal::torch_model::LoraConfig::from_json({{"target_modules", {"q_proj", "v_proj"}}}, "lora"), m.config(), 0));
}

}  // namespace
