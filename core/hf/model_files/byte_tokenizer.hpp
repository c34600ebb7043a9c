// A small Hugging Face tokenizer folder written from scratch: byte-level BPE
// with no merges (every UTF-8 byte is one token, ids 0-255), ChatML special
// tokens, and a ChatML chat template with tools. 320 ids in all (a multiple
// of 64, so a model's embedding has no rows without a token). With it a CPU
// model's vocabulary is ~500x smaller than Qwen3's, which is what lets the
// quickstart learn on two cores; `init-model --tokenizer bytes` uses it.
#pragma once

#include <string>

namespace areal::model {

// Writes tokenizer.json and tokenizer_config.json into `dir` (created).
// Both are the standard HF formats (loadable by HF tokenizers/transformers).
void write_byte_tokenizer(const std::string& dir);

// The vocabulary size of that tokenizer (bytes + specials + reserved ids).
constexpr int kByteTokenizerVocab = 320;

}  // namespace areal::model
