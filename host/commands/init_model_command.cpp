// `areal-host init-model --family qwen3|qwen3_moe|gpt_oss|qwen2|llama3 --preset tiny|tiny-hd32|small|agent|0.6b|4b|30b-a3b|20b
//  --tokenizer DIR|bytes --out DIR [--seed N] [--dtype float32|bfloat16|float16] [--shard-mb N]
//  [--max-position-embeddings N] [--end-turn-logit L] [--initializer-range S]`
#include <fstream>
#include <iostream>

#include <nlohmann/json.hpp>
#include <set>
#include <cstdint>
#include <string>
#include <stdexcept>
#include <exception>

#include "core/hf/model_files/init_model.hpp"
#include "core/hf/tokenizer/tokenizer.hpp"
#include "commands.hpp"

namespace areal::host {

int init_model(const CommandLine& cl) {
  static const std::set<std::string> kFlags = {"family", "preset", "tokenizer", "out", "seed", "dtype", "shard-mb", "max-position-embeddings", "end-turn-logit", "initializer-range"};
  for (const auto& [flag, _] : cl.flags)
    if (!kFlags.count(flag)) {
      std::cerr << "areal-host init-model: unknown flag --" << flag << "\n";
      return 2;
    }
  for (const char* required : {"family", "preset", "tokenizer", "out"})
    if (!cl.flags.count(required)) {
      std::cerr << "areal-host init-model: --" << required << " is required\n"
                << "usage: areal-host init-model --family qwen3|qwen3_moe|gpt_oss|qwen2|llama3 --preset tiny|tiny-hd32|small|agent|0.6b|4b|30b-a3b|20b --tokenizer DIR|bytes --out DIR "
                   "[--seed N] [--dtype float32|bfloat16|float16] [--shard-mb N] [--max-position-embeddings N] [--end-turn-logit L] [--initializer-range S]\n";
      return 2;
    }
  try {
    model::InitModelOptions o;
    o.family = cl.flags.at("family");
    o.preset = cl.flags.at("preset");
    o.tokenizer_dir = cl.flags.at("tokenizer");
    o.out_dir = cl.flags.at("out");
    if (cl.flags.count("seed")) o.seed = std::stoull(cl.flags.at("seed"));
    if (cl.flags.count("dtype")) o.dtype = cl.flags.at("dtype");
    if (cl.flags.count("shard-mb")) o.shard_mb = std::stoll(cl.flags.at("shard-mb"));
    if (cl.flags.count("end-turn-logit")) o.end_turn_logit = std::stod(cl.flags.at("end-turn-logit"));
    if (cl.flags.count("initializer-range")) o.initializer_range = std::stod(cl.flags.at("initializer-range"));
    if (cl.flags.count("max-position-embeddings")) o.max_position_embeddings = std::stoll(cl.flags.at("max-position-embeddings"));
    const int64_t params = model::init_model(o);
    std::cerr << "init-model: wrote a " << o.preset << " " << o.family << " model (" << params << " parameters, " << o.dtype
              << ") to " << o.out_dir << "\n";
    // Embedding rows are padded past the tokenizer (as real checkpoints are:
    // Qwen3 has 151,936 rows for 151,669 ids). The model can sample those ids;
    // they decode to no text and are recorded like any other token.
    const auto tok = tokenizer::Tokenizer::from_dir(o.out_dir);
    const int64_t rows = nlohmann::json::parse(std::ifstream(o.out_dir + "/config.json")).at("vocab_size").get<int64_t>(), ids = static_cast<int64_t>(tok->vocab_size());
    std::cerr << "init-model: vocabulary: " << rows << " embedding rows for the tokenizer's " << ids << " ids";
    if (rows > ids) std::cerr << " (padded to a multiple of 64; ids " << ids << ".." << rows - 1 << " have no token and decode to no text)";
    std::cerr << "\n";
    return 0;
  } catch (const std::invalid_argument&) {
    std::cerr << "areal-host init-model: --seed, --shard-mb and --max-position-embeddings take integers, --end-turn-logit and --initializer-range numbers\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "areal-host init-model: " << e.what() << "\n";
    return 2;
  }
}

}  // namespace areal::host
