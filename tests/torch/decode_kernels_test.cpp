// areal's own decode kernels (torch_model/decode_kernels.hpp) from the CPU:
// their references are what the model's own path computes (the GPU probe
// compares each kernel with its reference, so a kernel that passes it
// computes the model's numbers), and with the references standing in for
// the kernels (AREAL_EMULATE_DECODE_KERNELS) the local engine's decode path
// through them samples what it samples without them: the same tokens, and
// log-probs equal up to float32 rounding (which requests share a step
// follows timing), for Qwen3 (per-head norms), Qwen2 (q/k/v biases), Llama
// 3, and a LoRA adapter on half the batch (its q and k are no longer
// joined: the engine falls back to libtorch's kernels for the step). The
// CUDA source itself is compiled by unit.cuda_kernels_compile.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/hf/model_files/init_model.hpp"
#include "core/plugin_host/error.hpp"
#include "core/plugin_host/generation.hpp"
#include "core/plugin_host/string_writer.hpp"
#include "decode_kernels.hpp"
#include "decoder_model.hpp"
#include "local_engine.hpp"
#include "model_dir_once.hpp"
#include "perturbed_adapter.hpp"
#include "scoped_env.hpp"

namespace {

namespace fused = areal::torch_model::fused;

std::string model_dir(const std::string& family) {
  areal::model::InitModelOptions o;
  o.family = family, o.preset = "tiny", o.tokenizer_dir = "bytes", o.seed = 17;
  o.initializer_range = 0.2;
  return areal::testing::model_dir_once("decode-kernels-" + family, o);
}

// A decode layer's queries and cache rows for 5 rows writing slots out of
// order into caches that start as `initial`, by the model's own path or
// (`kernels`, emulated) through the fused call.
struct LayerOut {
  torch::Tensor q, k_cache, v_cache;
};
const std::vector<std::pair<int64_t, int64_t>> kWrites = {{2, 7}, {0, 3}, {1, 15}, {0, 0}, {2, 1}};  // (slot, position) of each row
LayerOut layer_through_cache(areal::torch_model::DecoderModel& m, bool kernels, const LayerOut& initial) {
  m.use_decode_kernels(kernels);
  EXPECT_EQ(m.decode_kernels(), kernels);
  torch::manual_seed(3);
  const torch::Tensor x = torch::randn({static_cast<int64_t>(kWrites.size()), m.config().hidden_size}).to(m.dtype());
  std::vector<int64_t> slots, positions;
  for (const auto& [slot, position] : kWrites) slots.push_back(slot), positions.push_back(position);
  const torch::Tensor at = torch::tensor(positions, torch::kInt64);
  LayerOut o{{}, initial.k_cache.clone(), initial.v_cache.clone()};
  torch::NoGradGuard no_grad;
  o.q = m.queries_caching_keys(1, x, m.rope_table(at), o.k_cache, o.v_cache, torch::tensor(slots, torch::kInt64), at);
  return o;
}

struct LayerCase {
  std::string family;
  torch::Dtype dtype;
};
void PrintTo(const LayerCase& c, std::ostream* os) { *os << c.family << (c.dtype == torch::kFloat32 ? " float32" : " bfloat16"); }
class DecodeKernelReference : public ::testing::TestWithParam<LayerCase> {};

TEST_P(DecodeKernelReference, IsTheModelsOwnPathBitForBit) {
  const areal::testing::ScopedEnv emulate("AREAL_EMULATE_DECODE_KERNELS", "1");
  auto m = areal::torch_model::DecoderModel::load(model_dir(GetParam().family), GetParam().dtype);
  m.join_projections();
  const auto& c = m.config();
  torch::manual_seed(5);
  const LayerOut initial{{}, torch::randn({3, 16, c.num_key_value_heads, c.head_dim}).to(m.dtype()),
                         torch::randn({3, 16, c.num_key_value_heads, c.head_dim}).to(m.dtype())};
  const LayerOut model = layer_through_cache(m, false, initial), kernel = layer_through_cache(m, true, initial);
  EXPECT_TRUE(torch::equal(model.q, kernel.q));
  EXPECT_TRUE(torch::equal(model.k_cache, kernel.k_cache));
  EXPECT_TRUE(torch::equal(model.v_cache, kernel.v_cache));
  // The five rows hold new keys and values; every other row is as it was.
  torch::Tensor k_expected = initial.k_cache.clone(), v_expected = initial.v_cache.clone();
  for (const auto& [slot, position] : kWrites) {
    EXPECT_FALSE(torch::equal(kernel.k_cache[slot][position], initial.k_cache[slot][position])) << slot << "," << position;
    k_expected[slot][position].copy_(kernel.k_cache[slot][position]);
    v_expected[slot][position].copy_(kernel.v_cache[slot][position]);
  }
  EXPECT_TRUE(torch::equal(kernel.k_cache, k_expected));
  EXPECT_TRUE(torch::equal(kernel.v_cache, v_expected));
}

INSTANTIATE_TEST_SUITE_P(Families, DecodeKernelReference,
                         ::testing::Values(LayerCase{"qwen3", torch::kFloat32}, LayerCase{"qwen3", torch::kBFloat16}, LayerCase{"qwen2", torch::kFloat32},
                                           LayerCase{"qwen2", torch::kBFloat16}, LayerCase{"llama3", torch::kBFloat16}),
                         [](const auto& info) { return info.param.family + (info.param.dtype == torch::kFloat32 ? "_float32" : "_bfloat16"); });

TEST(DecodeKernels, RefuseOperandsTheKernelDoesNotRead) {
  const areal::testing::ScopedEnv emulate("AREAL_EMULATE_DECODE_KERNELS", "1");
  const int64_t S = 3, H = 4, kv = 2, hd = 8;
  const torch::Tensor joined = torch::randn({S, (H + 2 * kv) * hd});
  const torch::Tensor qk = joined.narrow(1, 0, (H + kv) * hd).view({S, H + kv, hd}), v = joined.narrow(1, (H + kv) * hd, kv * hd).view({S, kv, hd});
  const torch::Tensor rope = torch::randn({2, S, 1, hd}), w = torch::ones({hd});
  const torch::Tensor k_cache = torch::zeros({2, 4, kv, hd}), v_cache = torch::zeros({2, 4, kv, hd});
  const torch::Tensor slots = torch::tensor({0, 1, 0}, torch::kInt64), positions = torch::tensor({0, 0, 1}, torch::kInt64);
  EXPECT_TRUE(fused::heads_into_cache(qk, v, w, w, 1e-6, rope, k_cache, v_cache, slots, positions).defined());
  EXPECT_FALSE(fused::heads_into_cache(qk, v, w, w, 1e-6, rope, k_cache, v_cache, slots.to(torch::kInt32), positions).defined());
  EXPECT_FALSE(fused::heads_into_cache(qk, v, w, torch::Tensor(), 1e-6, rope, k_cache, v_cache, slots, positions).defined());
  EXPECT_FALSE(fused::heads_into_cache(qk, v, w, w, 1e-6, rope, k_cache, torch::zeros({2, 4, kv, hd}, torch::kFloat64), slots, positions).defined());
  EXPECT_FALSE(fused::heads_into_cache(qk, v, w, w, 1e-6, rope, k_cache, torch::zeros({2, kv, 4, hd}).transpose(1, 2), slots, positions).defined());
  EXPECT_FALSE(fused::heads_into_cache(qk.transpose(1, 2).contiguous().transpose(1, 2), v, w, w, 1e-6, rope, k_cache, v_cache, slots, positions).defined());
  EXPECT_FALSE(fused::heads_into_cache(qk, v, w, w, 1e-6, rope.narrow(1, 0, 2), k_cache, v_cache, slots, positions).defined());
  // A refused call writes nothing.
  const torch::Tensor fresh = torch::zeros({2, 4, kv, hd});
  (void)fused::heads_into_cache(qk, v, w, w, 1e-6, rope, fresh, v_cache.clone(), slots.to(torch::kInt32), positions);
  EXPECT_TRUE(torch::equal(fresh, torch::zeros({2, 4, kv, hd})));
  const torch::Tensor gate_up = torch::randn({3, 10});
  EXPECT_TRUE(torch::equal(fused::silu_times_up(gate_up.narrow(1, 0, 5), gate_up.narrow(1, 5, 5)),
                           torch::silu(gate_up.narrow(1, 0, 5)) * gate_up.narrow(1, 5, 5)));
  EXPECT_FALSE(fused::silu_times_up(gate_up.narrow(1, 0, 5), gate_up.narrow(1, 5, 4)).defined());
  EXPECT_FALSE(fused::silu_times_up(gate_up.t(), gate_up.t()).defined());
}

TEST(DecodeKernels, ApplyOnlyWhereBuiltAndProbed) {
  // Off CUDA nothing applies unless emulated (a CPU build or device has no kernel to run).
  EXPECT_FALSE(fused::decode_kernels_apply(torch::Device(torch::kCPU), torch::kBFloat16, 128));
  const areal::testing::ScopedEnv emulate("AREAL_EMULATE_DECODE_KERNELS", "1");
  EXPECT_TRUE(fused::decode_kernels_apply(torch::Device(torch::kCPU), torch::kBFloat16, 128));
}

// Seeded sampling at temperature 1 of a batch of prompts of different
// lengths (prefilled together, then decoded together); with `adapter`, the
// even-numbered requests name it.
std::vector<areal::GenerationResult> generate(areal::testing::LocalEngine& e, const std::string& adapter) {
  std::vector<std::vector<int32_t>> prompts;
  for (int r = 0; r < 6; ++r) {
    std::vector<int32_t> p;
    for (int i = 0; i < 9 + 5 * r; ++i) p.push_back((13 + 29 * i + 7 * r) % 250);
    prompts.push_back(p);
  }
  return e.generate_seeded(prompts, 12, adapter, 40);
}

struct EngineCase {
  std::string family;
  bool lora;
};
void PrintTo(const EngineCase& c, std::ostream* os) { *os << c.family << (c.lora ? " with an adapter" : ""); }
class LocalDecodeKernels : public ::testing::TestWithParam<EngineCase> {};

TEST_P(LocalDecodeKernels, SampleWhatLibtorchsKernelsSample) {
  const EngineCase& k = GetParam();
  const areal::testing::ScopedEnv emulate("AREAL_EMULATE_DECODE_KERNELS", "1");
  auto serve = [&](bool kernels) {
    nlohmann::json config = {{"model_path", model_dir(k.family)}, {"max_batch", 8}, {"decode_kernels", kernels}, {"overlap", "on"}};
    if (k.lora) config["adapters"] = {{"a", areal::testing::perturbed_adapter_dir(model_dir(k.family), "decode-kernels-adapter-" + k.family)}};
    areal::testing::LocalEngine e(config);
    areal::StringCollector info;
    areal::throw_if_status(e.vt().info(e.instance.self(), info.writer()), "info");
    EXPECT_EQ(nlohmann::json::parse(info.text)["decode_kernels"], kernels);
    return generate(e, k.lora ? "a" : "");
  };
  const auto with = serve(true), without = serve(false);
  ASSERT_EQ(with.size(), without.size());
  // Which requests share a step follows when each was submitted, and a
  // product's rounding its row count, so two runs of one engine differ by
  // float32 rounding (the layer itself is equal bit for bit, above).
  double worst = 0;
  for (size_t i = 0; i < with.size(); ++i) {
    EXPECT_EQ(with[i].output_ids, without[i].output_ids) << "request " << i;
    EXPECT_EQ(with[i].output_ids.size(), 12u);
    ASSERT_EQ(with[i].logprobs.size(), without[i].logprobs.size());
    for (size_t t = 0; t < with[i].logprobs.size(); ++t)
      worst = std::max(worst, std::abs(static_cast<double>(with[i].logprobs[t]) - without[i].logprobs[t]));
  }
  EXPECT_LT(worst, 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Cases, LocalDecodeKernels,
                         ::testing::Values(EngineCase{"qwen3", false}, EngineCase{"qwen2", false}, EngineCase{"llama3", false}, EngineCase{"qwen3", true}),
                         [](const auto& info) { return info.param.family + (info.param.lora ? "_lora" : ""); });

}  // namespace
