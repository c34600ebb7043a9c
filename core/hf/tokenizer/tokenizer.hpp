// A Hugging Face tokenizer loaded from tokenizer.json (+ tokenizer_config.json),
// producing exactly the ids HF's Rust `tokenizers` produces for byte-level
// BPE families (Qwen2/2.5/3, Llama 3, DeepSeek V3, GPT-2 style).
//
// Thread-safe: encode/decode may be called concurrently.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/hf/tokenizer/added_vocabulary.hpp"
#include "core/hf/tokenizer/bpe_model.hpp"
#include "core/hf/tokenizer/decoder.hpp"
#include "core/hf/tokenizer/normalizer.hpp"
#include "core/hf/tokenizer/pre_tokenizer.hpp"

namespace areal::tokenizer {

class Tokenizer {
 public:
  // A Hugging Face folder: tokenizer.json, and tokenizer_config.json if
  // present. Throws areal::Error naming the file and what is wrong.
  static std::shared_ptr<const Tokenizer> from_dir(const std::string& dir);
  // tokenizer.json text (+ optional tokenizer_config.json object).
  static std::shared_ptr<const Tokenizer> from_json(const std::string& tokenizer_json, nlohmann::json config = nullptr,
                                                   const std::string& source = "tokenizer.json");

  // Encodes text. add_special_tokens applies the post-processor (e.g. Llama
  // 3's BOS); parse_special = false treats special tokens in the text as
  // plain text (HF's split_special_tokens). Input that is not valid UTF-8 is
  // encoded byte for byte (byte-level vocabularies only), so with no
  // normalizer (Llama 3, DeepSeek V3) any byte string round-trips through
  // decode_bytes; a normalizer (Qwen's NFC) changes text exactly as in HF.
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens = true, bool parse_special = true) const;

  // Decodes like HF's decode(ids, skip_special_tokens): invalid UTF-8 in the
  // result becomes U+FFFD. An id the tokenizer has no token for (a model's
  // padded vocabulary rows: Qwen3 has 151,936 rows for 151,669 ids) decodes
  // to no text, as HF tokenizers and so vLLM and SGLang decode it: a model
  // can sample such an id, and it is still a token of the output.
  std::string decode(const std::vector<int32_t>& ids, bool skip_special_tokens = false) const;
  // The exact bytes (byte-level decoders only); no replacement characters.
  std::string decode_bytes(const std::vector<int32_t>& ids, bool skip_special_tokens = false) const;

  int32_t token_to_id(const std::string& token) const;  // -1 if absent
  std::string id_to_token(int32_t id) const;            // "" if absent
  bool is_special(int32_t id) const;
  size_t vocab_size() const { return vocab_size_; }     // max id + 1, added tokens included
  bool byte_level_decoding() const { return pure_byte_level_; }
  // The bytes id contributes when decoding (byte-level decoders only);
  // empty for an id with no token.
  const std::string& token_bytes(int32_t id) const;
  bool has_token(int32_t id) const;  // whether decoding id gives it any token

  // tokenizer_config.json as loaded (null if absent).
  const nlohmann::json& config() const { return config_; }

 private:
  Tokenizer() = default;
  void post_process(std::vector<int32_t>& ids) const;

  std::unique_ptr<Normalizer> normalizer_;
  std::unique_ptr<PreTokenizer> pre_tokenizer_;
  std::unique_ptr<BpeModel> model_;
  std::unique_ptr<Decoder> decoder_;
  std::unique_ptr<AddedVocabulary> added_;
  std::vector<int32_t> prefix_ids_, suffix_ids_;  // post-processor template around the sequence
  bool pure_byte_level_ = false;
  std::vector<std::string> id_bytes_;
  size_t vocab_size_ = 0;
  nlohmann::json config_;
};

// Streams text out of ids as they are generated, never emitting a broken
// UTF-8 sequence: bytes of an incomplete character wait for the next id.
// The concatenation of everything returned equals decode(all ids).
class IncrementalDecoder {
 public:
  IncrementalDecoder(std::shared_ptr<const Tokenizer> tokenizer, bool skip_special_tokens);
  std::string push(int32_t id);  // text that became complete with this id
  std::string finish();          // whatever is left (incomplete bytes -> U+FFFD)

 private:
  std::shared_ptr<const Tokenizer> tok_;
  bool skip_special_;
  std::string pending_;           // byte-level path
  std::vector<int32_t> ids_;      // generic path
  size_t emitted_chars_ = 0;      // generic path: bytes of decode(ids_) already returned
};

}  // namespace areal::tokenizer
