// The local engine's prefix cache (issue #36): the n samples of a GRPO group
// and an agent's next turn take their shared prefix's keys and values from
// the cache, info() reports the hit rate, and what is sampled (tokens and
// log-probs, seeded) is what the engine samples with the cache off. For a
// dense model, for GPT-OSS (sinks, a 16-key window the cached prefixes
// cross), and for a group half of whose samples run with a LoRA adapter
// (rows of one adapter never serve the other; one prefill pass mixes
// cached and computed rows of both). And for the dense model with the CUDA
// engine's flash path over the cache, its kernel computed on the CPU
// (AREAL_EMULATE_CACHED_ATTENTION): the samples continuing a cached prefix
// attend in one call, with per-sequence counts and slot offsets.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/hf/model_files/init_model.hpp"
#include "core/plugin_host/error.hpp"
#include "core/plugin_host/generation.hpp"
#include "core/plugin_host/string_writer.hpp"
#include "local_engine.hpp"
#include "model_dir_once.hpp"
#include "perturbed_adapter.hpp"
#include "scoped_env.hpp"

namespace {

using Results = std::vector<areal::GenerationResult>;

std::string model_dir(const std::string& family) {
  areal::model::InitModelOptions o;
  o.family = family, o.preset = "tiny", o.tokenizer_dir = "bytes", o.seed = 31;
  o.initializer_range = 0.2;
  return areal::testing::model_dir_once("prefix-cache-" + family, o);
}

std::string adapter_dir(const std::string& family) {
  return areal::testing::perturbed_adapter_dir(model_dir(family), "prefix-cache-adapter-" + family);
}

Results generate(areal::testing::LocalEngine& e, const std::vector<std::vector<int32_t>>& prompts, int32_t max_new, const std::string& adapter = "") {
  return e.generate_seeded(prompts, max_new, adapter, 100);
}

nlohmann::json cache_info(areal::testing::LocalEngine& e) {
  areal::StringCollector info;
  areal::throw_if_status(e.vt().info(e.instance.self(), info.writer()), "info");
  return nlohmann::json::parse(info.text)["prefix_cache"];
}

struct Served {
  Results group, turn;
  nlohmann::json after_group, after_turn;
};

// A group of 8 samples of one 40-token prompt, then the next turn of the
// first sample's conversation: its prompt, its reply and 12 more tokens.
Served serve(const std::string& family, bool cache, bool lora, bool overlap) {
  nlohmann::json config = {{"model_path", model_dir(family)}, {"max_batch", 16}, {"prefix_cache", cache}, {"overlap", overlap ? "on" : "off"}};
  if (lora) config["adapters"] = {{"a", adapter_dir(family)}};
  areal::testing::LocalEngine e(config);
  const std::string adapter = lora ? "a" : "";
  std::vector<int32_t> prompt;
  for (int i = 0; i < 40; ++i) prompt.push_back((7 + 37 * i) % 300);
  Served r;
  r.group = generate(e, std::vector<std::vector<int32_t>>(8, prompt), 6, adapter);
  r.after_group = cache_info(e);
  std::vector<int32_t> next = prompt;
  next.insert(next.end(), r.group[0].output_ids.begin(), r.group[0].output_ids.end());
  for (int i = 0; i < 12; ++i) next.push_back((11 + 13 * i) % 300);
  r.turn = generate(e, {next}, 6, adapter);
  r.after_turn = cache_info(e);
  return r;
}

struct Case {
  std::string family;
  bool lora;
  bool flash = false;    // emulate the flash kernel over the cache
  bool overlap = false;  // decode with a step in flight (the fed tokens are recorded when read)
};

class LocalPrefixCache : public ::testing::TestWithParam<Case> {};

TEST_P(LocalPrefixCache, GroupSamplesAndNextTurnsHitItAndSampleTheSame) {
  const Case& k = GetParam();
  std::optional<areal::testing::ScopedEnv> emulate;
  if (k.flash) emulate.emplace("AREAL_EMULATE_CACHED_ATTENTION", "1");
  const Served on = serve(k.family, true, k.lora, k.overlap), off = serve(k.family, false, k.lora, false);
  // The group: the first sample (of each adapter) computes the prompt, the others copy its first 39 tokens.
  EXPECT_EQ(on.after_group["prompt_tokens"], 8 * 40);
  EXPECT_EQ(on.after_group["cached_tokens"], (k.lora ? 6 : 7) * 39);
  // The next turn: the first sample's slot holds its prompt and the 5 fed reply tokens.
  EXPECT_EQ(on.after_turn["cached_tokens"].get<int64_t>() - on.after_group["cached_tokens"].get<int64_t>(), 40 + 5);
  EXPECT_GT(on.after_turn["hit_rate"].get<double>(), k.lora ? 0.6 : 0.7);
  EXPECT_EQ(off.after_turn["cached_tokens"], 0);
  double worst = 0;
  for (const auto& [a, b] : {std::pair<const Results&, const Results&>{on.group, off.group}, {on.turn, off.turn}}) {
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(a[i].output_ids, b[i].output_ids) << "request " << i;
      for (size_t t = 0; t < std::min(a[i].logprobs.size(), b[i].logprobs.size()); ++t)
        worst = std::max(worst, std::abs(static_cast<double>(a[i].logprobs[t]) - b[i].logprobs[t]));
    }
  }
  EXPECT_LT(worst, 1e-5);
  std::printf("%s%s: hit rate %.3f (%s of %s prompt tokens cached); max |log-prob diff| against the cache off %.3g\n", k.family.c_str(),
              k.lora ? " with an adapter on half the group" : "",
              on.after_turn["hit_rate"].get<double>(), on.after_turn["cached_tokens"].dump().c_str(), on.after_turn["prompt_tokens"].dump().c_str(), worst);
}

INSTANTIATE_TEST_SUITE_P(Cases, LocalPrefixCache, ::testing::Values(Case{"qwen3", false}, Case{"gpt_oss", false}, Case{"qwen3", true}, Case{"qwen3", false, true},
                                                               Case{"qwen3", false, false, true}, Case{"qwen3", true, false, true}),
                         [](const auto& info) { return info.param.family + (info.param.lora ? "_lora" : "") + (info.param.flash ? "_flash" : "") + (info.param.overlap ? "_overlap" : ""); });

}  // namespace
