// `areal-host init-model`: a randomly initialised model folder in Hugging
// Face format from a real tokenizer folder — config.json,
// generation_config.json, safetensors with HF tensor names (sharded with an
// index when asked), and the tokenizer files. Seeded, so the same options
// give byte-identical files. Nothing is downloaded.
#pragma once

#include <cstdint>
#include <string>

namespace areal::model {

struct InitModelOptions {
  std::string family;         // qwen3 | qwen2 | llama3
  std::string preset;         // tiny | tiny-hd32 (tiny for vLLM CPU) | small | agent (tiny, 64k context) | 0.6b
  std::string tokenizer_dir;  // HF folder with tokenizer.json (+ tokenizer_config.json)
  std::string out_dir;
  uint64_t seed = 0;
  std::string dtype = "float32";  // float32 | bfloat16 | float16
  int64_t shard_mb = 0;           // > 0: shards of at most this many MiB plus an index
  int64_t max_position_embeddings = 0;  // > 0: the context written to config.json (else the preset's)
  // != 0: the end-of-turn token's logit is raised by about this much at
  // every position, so random weights end their turns (a reply of a few
  // tokens at 10 with a 151k vocabulary): for tests with agent programs,
  // which fail on a reply cut off by max_tokens.
  double end_turn_logit = 0;
  // > 0: the standard deviation of the random weights, written to config.json
  // as initializer_range (else HF's 0.02). Larger values spread the token
  // embeddings apart, as pretraining does: a tied output head whose digit
  // embeddings sit 0.24 apart caps their logit gap near 2 nats, which a LoRA
  // adapter (embeddings frozen) cannot widen (docs/algorithms.md, LoRA).
  double initializer_range = 0;
};

// Returns the number of parameters written. Throws areal::Error.
int64_t init_model(const InitModelOptions& options);

}  // namespace areal::model
