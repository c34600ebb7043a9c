#include "core/hf/model_files/init_model.hpp"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "core/plugin_host/error.hpp"
#include "core/hf/model_files/byte_tokenizer.hpp"
#include "core/hf/model_files/model_config.hpp"
#include "core/hf/tokenizer/tokenizer.hpp"

namespace areal::model {
namespace {

namespace fs = std::filesystem;

// splitmix64 + Box-Muller: the same numbers on every platform for a seed.
struct Normal {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  double uniform() { return ((next() >> 11) + 0.5) * (1.0 / 9007199254740992.0); }  // (0, 1)
  double sample() { return std::sqrt(-2.0 * std::log(uniform())) * std::cos(6.283185307179586 * uniform()); }
};

void write_json(const fs::path& p, const nlohmann::json& j) {
  std::ofstream out(p);
  if (!out) throw Error(AREAL_CODE_UNAVAILABLE, p.string() + ": cannot write");
  out << j.dump(2) << "\n";
}

// --end-turn-logit: hidden channel 0 of every embedding is 1, which the
// final RMSNorm turns into about sqrt(hidden) at every position (the
// layers' 0.02-scale weights barely move it). The output row of the
// end-of-turn token reads that channel with weight L / sqrt(hidden) more
// than every other row, so its logit is about L above where it would be.
void add_end_turn_channel(const ModelConfig& c, const std::string& name, double logit, std::vector<float>& values) {
  const int64_t H = c.hidden_size;
  const float lift = static_cast<float>(logit / std::sqrt(static_cast<double>(H)));
  if (name == "model.embed_tokens.weight") {
    for (int64_t v = 0; v < c.vocab_size; ++v) values[static_cast<size_t>(v * H)] = 1.0f;
    if (c.tie_word_embeddings) values[static_cast<size_t>(c.eos_token_id * H)] += lift;
  } else if (name == "lm_head.weight") {
    for (int64_t v = 0; v < c.vocab_size; ++v) values[static_cast<size_t>(v * H)] = 0.0f;
    values[static_cast<size_t>(c.eos_token_id * H)] = lift;
  }
}

}  // namespace

int64_t init_model(const InitModelOptions& o) {
  if (o.out_dir.empty()) throw Error(AREAL_CODE_INVALID_ARGUMENT, "--out DIR is required");
  DType dtype;
  if (o.dtype == "float32") dtype = DType::kF32;
  else if (o.dtype == "bfloat16") dtype = DType::kBF16;
  else if (o.dtype == "float16") dtype = DType::kF16;
  else throw Error(AREAL_CODE_INVALID_ARGUMENT, "--dtype must be float32, bfloat16 or float16, got '" + o.dtype + "'");
  // "bytes": write our own small byte-level tokenizer into the output folder first.
  std::string tokenizer_dir = o.tokenizer_dir;
  if (tokenizer_dir == "bytes") {
    write_byte_tokenizer(o.out_dir);
    tokenizer_dir = o.out_dir;
  }
  auto tok = tokenizer::Tokenizer::from_dir(tokenizer_dir);
  ModelConfig c = preset(o.family, o.preset, static_cast<int64_t>(tok->vocab_size()));
  c.torch_dtype = o.dtype;
  if (o.max_position_embeddings < 0 || o.max_position_embeddings > (int64_t{1} << 24))
    throw Error(AREAL_CODE_INVALID_ARGUMENT, "--max-position-embeddings must be between 1 and 16777216");
  if (o.max_position_embeddings > 0) c.max_position_embeddings = o.max_position_embeddings;
  if (o.initializer_range < 0 || o.initializer_range > 10 || !std::isfinite(o.initializer_range))
    throw Error(AREAL_CODE_INVALID_ARGUMENT, "--initializer-range must be a number in (0, 10]");
  if (o.initializer_range > 0) c.initializer_range = o.initializer_range;
  auto special = [&](const char* key) -> int64_t {
    const auto& cfg = tok->config();
    if (!cfg.is_object() || !cfg.contains(key) || cfg[key].is_null()) return -1;
    const auto& v = cfg[key];
    return tok->token_to_id(v.is_string() ? v.get<std::string>() : v.value("content", std::string()));
  };
  c.bos_token_id = special("bos_token");
  c.eos_token_id = special("eos_token");
  if (o.end_turn_logit != 0 && (c.eos_token_id < 0 || !std::isfinite(o.end_turn_logit)))
    throw Error(AREAL_CODE_INVALID_ARGUMENT, "--end-turn-logit needs a finite number and a tokenizer with an eos_token");

  fs::create_directories(o.out_dir);
  for (const auto& entry : fs::directory_iterator(o.out_dir))
    if (entry.path().filename().string().rfind("model", 0) == 0 && entry.path().extension() != ".json")
      fs::remove(entry.path());  // stale shards of an earlier init would confuse loaders
  fs::remove(fs::path(o.out_dir) / "model.safetensors.index.json");

  Normal rng{o.seed};
  const int64_t shard_bytes = o.shard_mb > 0 ? o.shard_mb << 20 : INT64_MAX;
  std::vector<SafetensorsWriter> shards(1);
  std::vector<std::vector<std::string>> shard_names(1);
  int64_t params = 0, total_bytes = 0;
  for (const auto& w : c.weights()) {
    size_t n = 1;
    for (int64_t d : w.shape) n *= static_cast<size_t>(d);
    params += static_cast<int64_t>(n);
    std::vector<float> values(n);
    for (float& v : values)
      v = w.init == WeightSpec::kOnes ? 1.0f : w.init == WeightSpec::kZeros ? 0.0f : static_cast<float>(rng.sample() * c.initializer_range);
    if (o.end_turn_logit != 0) add_end_turn_channel(c, w.name, o.end_turn_logit, values);
    std::vector<uint8_t> bytes(n * dtype_size(dtype));
    if (dtype == DType::kF32) {
      std::memcpy(bytes.data(), values.data(), bytes.size());
    } else {
      auto* h = reinterpret_cast<uint16_t*>(bytes.data());
      for (size_t i = 0; i < n; ++i) h[i] = dtype == DType::kBF16 ? float_to_bf16(values[i]) : float_to_f16(values[i]);
    }
    if (shards.back().data_bytes() > 0 && static_cast<int64_t>(shards.back().data_bytes() + bytes.size()) > shard_bytes) {
      shards.emplace_back();
      shard_names.emplace_back();
    }
    shards.back().add(w.name, dtype, w.shape, bytes.data(), bytes.size());
    shard_names.back().push_back(w.name);
    total_bytes += static_cast<int64_t>(bytes.size());
  }
  if (shards.size() == 1) {
    shards[0].save((fs::path(o.out_dir) / "model.safetensors").string());
  } else {
    nlohmann::json map = nlohmann::json::object();
    char name[64];
    for (size_t k = 0; k < shards.size(); ++k) {
      std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", k + 1, shards.size());
      shards[k].save((fs::path(o.out_dir) / name).string());
      for (const auto& t : shard_names[k]) map[t] = name;
    }
    write_json(fs::path(o.out_dir) / "model.safetensors.index.json", {{"metadata", {{"total_size", total_bytes}}}, {"weight_map", map}});
  }
  write_json(fs::path(o.out_dir) / "config.json", c.to_hf_json());
  nlohmann::json gen = {{"do_sample", true}, {"temperature", 1.0}, {"top_p", 1.0}};
  if (c.bos_token_id >= 0) gen["bos_token_id"] = c.bos_token_id;
  if (c.eos_token_id >= 0) gen["eos_token_id"] = c.eos_token_id;
  write_json(fs::path(o.out_dir) / "generation_config.json", gen);
  for (const char* f : {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.json", "merges.txt", "added_tokens.json"}) {
    const fs::path src = fs::path(tokenizer_dir) / f;
    if (fs::exists(src) && !fs::equivalent(src.parent_path(), fs::path(o.out_dir)))
      fs::copy_file(src, fs::path(o.out_dir) / f, fs::copy_options::overwrite_existing);
  }
  return params;
}

}  // namespace areal::model
