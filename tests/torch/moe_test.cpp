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
#include <fstream>
#include <cstdio>

#include <gtest/gtest.h>

#include "core/hf/model_files/init_model.hpp"
#include "core/plugin_host/host_tensor.hpp"
#include "core/recorder/episode_recorder.hpp"
#include "core/recorder/recorder.hpp"
#include "core/trainer/trajectory_batch.hpp"
#include "core/plugin_host/error.hpp"
#include "core/plugin_host/generation.hpp"
#include "decoder_model.hpp"
#include "local_engine.hpp"
#include "fsdp_logprobs.hpp"
#include "mean_nll_loss.hpp"
#include "lora_adapter.hpp"
#include "model_dir_once.hpp"
#include "test_temp_dir.hpp"

using areal::torch_model::DecoderModel;
using areal::torch_model::MoeRouting;
namespace fs = std::filesystem;

namespace {

std::string tiny_moe_dir(const std::string& preset) {
  areal::model::InitModelOptions o;
  o.family = "qwen3_moe", o.preset = preset, o.tokenizer_dir = "bytes", o.seed = 11;
  o.initializer_range = 0.2;  // routers far from uniform
  return areal::testing::model_dir_once("moe-" + preset, o);
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
  const auto sinks = engine.submit_recording_routing(prompts, 12);
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

namespace {

// A tiny MoE folder whose layers route each token to one expert with weight
// 1 (top-1, renormalised): the router's probabilities then never scale the
// output, so a trainer whose routers differ computes exactly the engine's
// log-probs once it uses the engine's experts, and visibly other ones
// where it picks its own.
std::string top1_moe_dir() {
  areal::model::InitModelOptions o;
  o.family = "qwen3_moe", o.preset = "tiny", o.tokenizer_dir = "bytes", o.seed = 21;
  o.initializer_range = 0.2;
  const std::string dir = areal::testing::model_dir_once("moe-top1", o);
  nlohmann::json c = nlohmann::json::parse(std::ifstream(dir + "/config.json"));
  c["num_experts_per_tok"] = 1;
  c["norm_topk_prob"] = true;
  std::ofstream(dir + "/config.json") << c.dump(2);
  return dir;
}

// The same weights but every router perturbed: the trainer's policy routes
// other experts than the engine's for many tokens.
std::string perturbed_copy(const std::string& dir) {
  const std::string out = areal::testing::test_temp_dir("moe-top1-perturbed");
  DecoderModel m = DecoderModel::load(dir, torch::kFloat32);
  perturb_routers(m, 0.5);
  m.save(out, "float32");
  fs::copy(dir + "/tokenizer.json", out + "/tokenizer.json", fs::copy_options::overwrite_existing);
  fs::copy(dir + "/tokenizer_config.json", out + "/tokenizer_config.json", fs::copy_options::overwrite_existing);
  return out;
}

struct Rollout {
  std::vector<areal::recorder::TrajectoryRow> rows;  // through the recorder, as the gateway exports them
  size_t sampled = 0;
};

// The local engine samples after each prompt with record_routing; each call
// is recorded (Recorder::complete with its routing) and exported as a row.
Rollout roll_out(const std::string& dir, const std::vector<std::vector<int32_t>>& prompts) {
  areal::testing::LocalEngine engine(nlohmann::json{{"model_path", dir}, {"max_batch", 4}});
  areal::recorder::Recorder record;
  areal_sampling_params s{};
  s.struct_size = AREAL_OFFSET_OF_END(areal_sampling_params, json_schema);
  s.temperature = 1.0f, s.top_p = 1.0f, s.max_new_tokens = 16, s.ignore_eos = 1, s.has_seed = 1;
  Rollout out;
  for (size_t i = 0; i < prompts.size(); ++i) {
    areal_gen_request r{};
    r.struct_size = AREAL_OFFSET_OF_END(areal_gen_request, record_routing);
    r.request_id = areal::next_request_id();
    r.input_ids = prompts[i].data(), r.input_ids_count = prompts[i].size(), r.sampling = &s;
    r.record_routing = 1;
    s.seed = 40 + i;
    areal::CollectingSink sink;
    areal::throw_if_status(engine.vt().submit(engine.instance.self(), &r, sink.sink()), "submit");
    EXPECT_TRUE(sink.wait(std::chrono::seconds(60)));
    auto res = sink.result();
    EXPECT_EQ(res.on_routing_calls, 1);
    areal::recorder::ExpertRouting routing;
    routing.moe_layers = res.routing_layers, routing.top_k = res.routing_top_k, routing.num_experts = res.routing_experts;
    routing.experts = res.routing;
    const size_t index = record.insert_next_turn("ep" + std::to_string(i));
    record.complete(index, nullptr, prompts[i], res.output_ids, res.logprobs, res.versions, "length", false, routing);
    out.sampled += res.output_ids.size();
  }
  out.rows = record.export_rows(areal::recorder::ExportStyle::kIndividual, 1.0);
  return out;
}

std::vector<float> trainer_logprobs(const std::string& dir, const std::string& replay, areal::trainer::PackedBatch& batch) {
  areal::testing::LocalEngine host_side(nlohmann::json{{"model_path", dir}});  // only for its catalog and services
  areal::TensorMapBuilder m = batch.map();
  return areal::testing::fsdp_logprobs(host_side.catalog, &host_side.services,
                                       {{"model_path", dir}, {"moe", {{"routing_replay", replay}}}}, m.get());
}

}  // namespace

// Issue #35's acceptance: the trainer's own routers choose other experts
// than the rollout's, and train.moe.routing_replay: rollout makes its
// recomputed log-probs equal the recorded ones. The routing travels the
// real path: engine (ABI 1.7) -> Recorder::complete -> export_rows ->
// PackedBatch's routed_experts -> the fsdp plugin's compute_logprobs.
TEST(Moe, RolloutRoutingReplayMakesTheTrainersLogprobsEqualTheRecordedOnes) {
  const std::string engine_dir = top1_moe_dir();
  const std::string trainer_dir = perturbed_copy(engine_dir);
  const Rollout rollout = roll_out(engine_dir, {{5, 9, 33, 2, 71}, {100, 4}, {7, 7, 7, 8, 9, 10, 11, 12}, {250, 1, 60}});
  areal::trainer::PackedBatch batch(0, 1.0f);
  for (const auto& row : rollout.rows) {
    ASSERT_EQ(row.routing.positions() + 1, row.input_ids.size());
    batch.add(row, 0);
  }
  ASSERT_EQ(batch.routed_experts.values().size(), batch.tokens() * 2);  // 2 MoE layers x top-1
  // How often the trainer's routers would choose otherwise: a record pass over the same rows.
  const DecoderModel trainer_model = DecoderModel::load(trainer_dir, torch::kFloat32);
  MoeRouting own;
  own.record = true;
  {
    torch::NoGradGuard no_grad;
    trainer_model.hidden(torch::tensor(std::vector<int64_t>(batch.input_ids.values().begin(), batch.input_ids.values().end())),
                         torch::tensor(std::vector<int64_t>(batch.cu_seqlens.values().begin(), batch.cu_seqlens.values().end())), false, &own);
  }
  const torch::Tensor own_experts = torch::stack(own.chosen, 1).squeeze(2);  // [T, 2]
  const auto& recorded = batch.routed_experts.values();
  size_t differ = 0, compared = 0;
  for (int64_t t = 0; t < own_experts.size(0); ++t)
    for (int64_t l = 0; l < 2; ++l)
      if (recorded[t * 2 + l] >= 0) ++compared, differ += own_experts[t][l].item<int64_t>() != recorded[t * 2 + l];
  EXPECT_GT(differ * 5, compared) << differ << " of " << compared << " (token, layer) routes differ: the perturbation is too weak to test replay";

  const auto none = trainer_logprobs(trainer_dir, "none", batch);
  const auto replayed = trainer_logprobs(trainer_dir, "rollout", batch);
  double worst_none = 0, worst_replay = 0;
  size_t k = 0;
  for (size_t t = 0; t < batch.tokens(); ++t) {
    if (!batch.loss_mask.values()[t]) continue;
    ++k;
    worst_none = std::max(worst_none, std::abs(static_cast<double>(none[t]) - batch.logprobs.values()[t]));
    worst_replay = std::max(worst_replay, std::abs(static_cast<double>(replayed[t]) - batch.logprobs.values()[t]));
  }
  EXPECT_EQ(k, rollout.sampled);
  EXPECT_GT(worst_none, 1e-2) << "without replay the perturbed routers should change the log-probs";
  EXPECT_LT(worst_replay, 2e-5) << "with the rollout's experts the trainer must recompute the recorded log-probs";
  std::printf("routes differing: %zu of %zu; max |trainer - engine| over %zu sampled tokens: %.3g without replay, %.3g with\n", differ, compared, k,
              worst_none, worst_replay);
}

// R2: train.moe.routing_replay: recompute replays the experts of the step's
// log-prob recomputation in its update (or of a no-grad first pass), so the
// update's forward gives the recomputed log-probs; rollout replay without
// recorded routing is refused with a clear error.
TEST(Moe, RecomputeReplayAndAMissingRolloutRoutingAreHandled) {
  const std::string dir = tiny_moe_dir("tiny");
  areal::testing::LocalEngine host_side(nlohmann::json{{"model_path", dir}});
  auto fsdp = host_side.catalog.resolve("fsdp", AREAL_KIND_TRAIN);
  areal::HostTensor<int32_t> ids(std::vector<int32_t>{5, 9, 33, 2, 71, 100, 4, 7, 7, 8, 9}), cu(std::vector<int32_t>{0, 5, 11}),
      mask(std::vector<int32_t>{0, 0, 1, 1, 1, 0, 0, 1, 1, 1, 1});
  areal::TensorMapBuilder b;
  b.add("input_ids", ids.dl()).add("cu_seqlens", cu.dl()).add("loss_mask", mask.dl());
  struct Seen {
    std::vector<float> lp;
  } seen;
  areal_loss_fn capture{AREAL_OFFSET_OF_END(areal_loss_fn, eval), &seen,
                        [](void* ctx, const areal_tensor_map* m, double* loss, DLTensor* grad, const areal_writer* w) -> areal_status* {
                          for (size_t i = 0; i < m->count; ++i)
                            if (std::string(m->names[i].data, m->names[i].size) == "new_logprobs") {
                              const auto* p = static_cast<const float*>(m->tensors[i]->data);
                              auto& lp = static_cast<Seen*>(ctx)->lp;  // micro-batch after micro-batch
                              lp.insert(lp.end(), p, p + m->tensors[i]->shape[0]);
                            }
                          return areal::testing::mean_nll_eval(nullptr, m, loss, grad, w);
                        }};
  // One micro-batch, and one a row (the recomputation's experts then come back in parts, joined by row).
  for (const auto& [first_pass, budget] : std::vector<std::pair<bool, int64_t>>{{true, 8192}, {false, 8192}, {true, 6}, {false, 6}}) {
    areal::PluginInstance train(
        fsdp, nlohmann::json{{"model_path", dir}, {"lr", 0.0}, {"micro_batch_tokens", budget}, {"moe", {{"routing_replay", "recompute"}}}}.dump(),
        &host_side.services);
    std::vector<float> want;
    if (first_pass) {
      DLManagedTensor* lp = nullptr;
      areal::throw_if_status(fsdp->train()->compute_logprobs(train.self(), b.get(), 1.0f, &lp), "compute_logprobs");
      want.assign(static_cast<const float*>(lp->dl_tensor.data), static_cast<const float*>(lp->dl_tensor.data) + lp->dl_tensor.shape[0]);
      lp->deleter(lp);
    }
    seen.lp.clear();
    areal::throw_if_status(fsdp->train()->train_step(train.self(), b.get(), &capture, nullptr), "train_step");
    ASSERT_EQ(seen.lp.size(), 11u);
    for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(seen.lp[i], want[i], 1e-6) << i << " budget " << budget;
  }
  areal::PluginInstance train(fsdp, nlohmann::json{{"model_path", dir}, {"moe", {{"routing_replay", "rollout"}}}}.dump(), &host_side.services);
  DLManagedTensor* lp = nullptr;
  areal_status* st = fsdp->train()->compute_logprobs(train.self(), b.get(), 1.0f, &lp);
  ASSERT_NE(st, nullptr) << "rollout replay of a batch without routed_experts was accepted";
  EXPECT_NE(std::string(areal::status_message(st)).find("gateway.record_routing"), std::string::npos) << areal::status_message(st);
  areal::free_status(st);
}

// rollout.record_routing: a workflow's api->generate calls record their
// routing, and the episode's rows carry it (without it, none).
TEST(Moe, WorkflowEpisodesRecordRoutingWhenAsked) {
  areal::testing::LocalEngine engine(nlohmann::json{{"model_path", tiny_moe_dir("tiny")}});
  const std::vector<int32_t> prompt = {5, 9, 33, 2};
  areal_sampling_params s{};
  s.struct_size = AREAL_OFFSET_OF_END(areal_sampling_params, json_schema);
  s.temperature = 1.0f, s.top_p = 1.0f, s.max_new_tokens = 6, s.ignore_eos = 1;
  for (const bool record : {true, false}) {
    areal::EpisodeRecorder rec("ep", &engine.vt(), engine.instance.self(), 1, record);
    areal_gen_request r{};
    r.struct_size = AREAL_OFFSET_OF_END(areal_gen_request, sampling);  // a workflow built before ABI 1.7
    r.input_ids = prompt.data(), r.input_ids_count = prompt.size(), r.sampling = &s;
    const areal_completion* out = nullptr;
    areal::throw_if_status(rec.api()->generate(rec.api()->ctx, &r, &out), "generate");
    const auto rows = rec.record().export_rows(areal::recorder::ExportStyle::kIndividual, 1.0);
    ASSERT_EQ(rows.size(), 1u);
    if (record) {
      EXPECT_EQ(rows[0].routing.positions(), prompt.size() + 6 - 1);
      EXPECT_EQ(rows[0].routing.moe_layers, 2u);
      EXPECT_EQ(rows[0].routing.top_k, 2u);
    } else {
      EXPECT_TRUE(rows[0].routing.empty());
    }
  }
}

// LoRA on a MoE model: named expert projections are refused by name;
// all-linear (the YAML default) is the attention, as PEFT expands it where
// experts are not linear layers; with dense MLP layers too it is refused.
TEST(Moe, LoraOnExpertsIsRefusedByNameAndAllLinearIsTheAttention) {
  const DecoderModel m = tiny_moe("tiny");
  try {
    areal::torch_model::LoraAdapter::init(areal::torch_model::LoraConfig::from_json({{"target_modules", {"q_proj", "gate_proj"}}}, "lora"), m.config(), 0);
    FAIL() << "LoRA on the experts of a MoE model was accepted";
  } catch (const areal::Error& e) {
    EXPECT_EQ(e.code(), AREAL_CODE_UNSUPPORTED);
    EXPECT_NE(std::string(e.what()).find("q_proj, k_proj, v_proj, o_proj"), std::string::npos) << e.what();
  }
  const auto all = areal::torch_model::LoraAdapter::init(areal::torch_model::LoraConfig::from_json(nlohmann::json::object(), "lora"), m.config(), 0);
  EXPECT_TRUE(all.config().targets[static_cast<size_t>(areal::torch_model::LoraModule::kQ)]);
  EXPECT_FALSE(all.config().targets[static_cast<size_t>(areal::torch_model::LoraModule::kGate)]);
  EXPECT_THROW(areal::torch_model::LoraAdapter::init(areal::torch_model::LoraConfig::from_json(nlohmann::json::object(), "lora"),
                                                     tiny_moe("tiny-hd32").config(), 0),
               areal::Error);  // a dense layer 0: all-linear would mean its MLP alone
  EXPECT_NO_THROW(areal::torch_model::LoraAdapter::init(
      areal::torch_model::LoraConfig::from_json({{"target_modules", {"q_proj", "v_proj"}}}, "lora"), m.config(), 0));
}

}  // namespace
