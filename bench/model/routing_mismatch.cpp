// What routing replay buys (issue #35), measured on CPU: the local engine
// samples from a Qwen3-MoE folder with record_routing; the rows go through
// the recorder and the packed batch as in training; the fsdp plugin then
// recomputes their log-probs with train.moe.routing_replay none and
// rollout. Two sources of train/rollout mismatch:
//   bf16-engine  the engine computes in bfloat16, the trainer in float32
//                (the usual GPU set-up: near-tie routers flip);
//   perturbed    both float32, the trainer's routers moved by noise of
//                `sigma` times the routers' own standard deviation (a
//                policy whose routers drifted, e.g. after an update).
// For each it prints the share of (token, MoE layer) routes and of tokens
// whose trainer-chosen experts differ from the rollout's, and the log-prob
// mismatch (max and mean |trainer - engine| over sampled tokens) with
// replay off and on. bench/model/routing_mismatch.sh runs it.
//   areal_routing_mismatch MODEL_DIR REQUESTS NEW_TOKENS SIGMA
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>
#include <cstdint>
#include <exception>

#include <nlohmann/json.hpp>

#include "core/plugin_host/error.hpp"
#include "core/plugin_host/generation.hpp"
#include "core/plugin_host/plugin_catalog.hpp"
#include "core/plugin_host/plugin_instance.hpp"
#include "core/recorder/recorder.hpp"
#include "core/trainer/trajectory_batch.hpp"
#include "decoder_model.hpp"
#include "fsdp_logprobs.hpp"

namespace fs = std::filesystem;
using areal::torch_model::DecoderModel;

namespace {

struct Plugins {
  areal::PluginCatalog catalog{{AREAL_BENCH_PLUGIN_DIR}};
  std::string name = "bench";
  areal_services services = areal::make_services(name);
};

// Samples `new_tokens` after each of `requests` random prompts; the rows as the recorder exports them.
std::vector<areal::recorder::TrajectoryRow> roll_out(Plugins& p, const std::string& dir, const std::string& dtype, int requests, int new_tokens) {
  auto local = p.catalog.resolve("local", AREAL_KIND_INFERENCE);
  areal::PluginInstance engine(local, nlohmann::json{{"model_path", dir}, {"dtype", dtype}, {"max_batch", requests}}.dump(), &p.services);
  areal::recorder::Recorder record;
  std::vector<std::vector<int32_t>> prompts;
  torch::manual_seed(1);
  for (int i = 0; i < requests; ++i) {
    const torch::Tensor ids = torch::randint(3, 300, {16 + i % 8}, torch::kInt32);
    prompts.emplace_back(ids.data_ptr<int32_t>(), ids.data_ptr<int32_t>() + ids.numel());
  }
  areal_sampling_params s{};
  s.struct_size = AREAL_OFFSET_OF_END(areal_sampling_params, json_schema);
  s.temperature = 1.0f, s.top_p = 1.0f, s.max_new_tokens = new_tokens, s.ignore_eos = 1, s.has_seed = 1;
  std::vector<std::unique_ptr<areal::CollectingSink>> sinks;
  std::vector<areal_sampling_params> params(static_cast<size_t>(requests), s);
  for (int i = 0; i < requests; ++i) {
    params[i].seed = 100 + static_cast<uint64_t>(i);
    areal_gen_request r{};
    r.struct_size = AREAL_OFFSET_OF_END(areal_gen_request, record_routing);
    r.request_id = areal::next_request_id();
    r.input_ids = prompts[i].data(), r.input_ids_count = prompts[i].size(), r.sampling = &params[i];
    r.record_routing = 1;
    sinks.push_back(std::make_unique<areal::CollectingSink>());
    areal::throw_if_status(local->inference()->submit(engine.self(), &r, sinks.back()->sink()), "submit");
  }
  for (int i = 0; i < requests; ++i) {
    if (!sinks[i]->wait(std::chrono::minutes(10))) throw areal::Error(AREAL_CODE_DEADLINE_EXCEEDED, "generation timed out");
    auto res = sinks[i]->result();
    areal::recorder::ExpertRouting routing;
    routing.moe_layers = res.routing_layers, routing.top_k = res.routing_top_k, routing.num_experts = res.routing_experts;
    routing.experts = res.routing;
    const size_t index = record.insert_next_turn("r" + std::to_string(i));
    record.complete(index, nullptr, prompts[i], res.output_ids, res.logprobs, res.versions, "length", false, routing);
  }
  return record.export_rows(areal::recorder::ExportStyle::kIndividual, 1.0);
}

std::vector<float> trainer_logprobs(Plugins& p, const std::string& dir, const std::string& replay, areal::trainer::PackedBatch& batch) {
  areal::TensorMapBuilder m = batch.map();
  return areal::testing::fsdp_logprobs(p.catalog, &p.services, {{"model_path", dir}, {"moe", {{"routing_replay", replay}}}}, m.get());
}

void measure(Plugins& p, const std::string& label, const std::string& engine_dir, const std::string& engine_dtype, const std::string& trainer_dir,
             int requests, int new_tokens) {
  const auto rows = roll_out(p, engine_dir, engine_dtype, requests, new_tokens);
  areal::trainer::PackedBatch batch(0, 1.0f);
  for (const auto& r : rows) batch.add(r, 0);
  // The trainer's own routing of the same tokens (float32, as fsdp computes).
  const DecoderModel model = DecoderModel::load(trainer_dir, torch::kFloat32);
  areal::torch_model::MoeRouting own;
  own.record = true;
  {
    torch::NoGradGuard no_grad;
    const auto& ids = batch.input_ids.values();
    const auto& cu = batch.cu_seqlens.values();
    model.hidden(torch::tensor(std::vector<int64_t>(ids.begin(), ids.end())), torch::tensor(std::vector<int64_t>(cu.begin(), cu.end())), false, &own);
  }
  const int64_t L = static_cast<int64_t>(own.chosen.size()), k = own.chosen[0].size(1);
  const torch::Tensor mine = std::get<0>(torch::stack(own.chosen, 1).sort(-1));  // [T, L, k], sets compared
  const auto& rec = batch.routed_experts.values();
  const torch::Tensor theirs = std::get<0>(torch::tensor(std::vector<int64_t>(rec.begin(), rec.end())).view({-1, L, k}).sort(-1));
  const torch::Tensor recorded = theirs.select(2, 0).ge(0);  // [T, L]: each row's last token was never routed
  const torch::Tensor differs = mine.ne(theirs).any(2).logical_and(recorded);
  const double routes = differs.sum().item<double>() / std::max(1.0, recorded.sum().item<double>());
  const double tokens = differs.any(1).sum().item<double>() / std::max(1.0, recorded.any(1).sum().item<double>());
  const auto none = trainer_logprobs(p, trainer_dir, "none", batch);
  const auto replay = trainer_logprobs(p, trainer_dir, "rollout", batch);
  double max_none = 0, max_replay = 0, sum_none = 0, sum_replay = 0;
  size_t n = 0;
  for (size_t t = 0; t < batch.tokens(); ++t) {
    if (!batch.loss_mask.values()[t]) continue;
    const double a = std::abs(static_cast<double>(none[t]) - batch.logprobs.values()[t]);
    const double b = std::abs(static_cast<double>(replay[t]) - batch.logprobs.values()[t]);
    max_none = std::max(max_none, a), max_replay = std::max(max_replay, b);
    sum_none += a, sum_replay += b, ++n;
  }
  std::printf("| %s | %zu | %.1f%% | %.1f%% | %.3g / %.3g | %.3g / %.3g |\n", label.c_str(), n, 100 * routes, 100 * tokens, max_none, sum_none / n,
              max_replay, sum_replay / n);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s MODEL_DIR REQUESTS NEW_TOKENS SIGMA\n", argv[0]);
    return 2;
  }
  try {
    const std::string dir = argv[1];
    const int requests = std::stoi(argv[2]), new_tokens = std::stoi(argv[3]);
    const double sigma = std::stod(argv[4]);
    // The perturbed trainer: every router moved by sigma x its own standard deviation.
    const std::string perturbed = dir + "-perturbed";
    {
      DecoderModel m = DecoderModel::load(dir, torch::kFloat32);
      torch::NoGradGuard no_grad;
      torch::manual_seed(5);
      for (auto& [name, t] : m.named_parameters())
        if (name.find("mlp.gate.weight") != std::string::npos) const_cast<torch::Tensor&>(t).add_(torch::randn_like(t) * t.std() * sigma);
      m.save(perturbed, "float32");
    }
    Plugins p;
    std::printf("| mismatch source | sampled tokens | routes differing (token x layer) | tokens with a differing layer | "
                "max / mean abs log-prob diff, replay none | the same, replay rollout |\n|---|---|---|---|---|---|\n");
    measure(p, "engine bfloat16, trainer float32", dir, "bfloat16", dir, requests, new_tokens);
    char label[96];
    std::snprintf(label, sizeof label, "trainer routers perturbed (sigma %.2g x std)", sigma);
    measure(p, label, dir, "float32", perturbed, requests, new_tokens);
    measure(p, "none (engine and trainer float32, same weights)", dir, "float32", dir, requests, new_tokens);
    fs::remove_all(perturbed);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "routing_mismatch: %s\n", e.what());
    return 1;
  }
}
