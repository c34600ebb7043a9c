// tokenizer.json "decoder": ByteLevel, ByteFallback, Fuse, Replace, Strip
// and Sequence; plus the incremental decoder used for streaming.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace areal::tokenizer {

class Decoder {
 public:
  virtual ~Decoder() = default;
  // HF's decode_chain: token strings in, token strings out.
  virtual void decode_chain(std::vector<std::string>& tokens) const = 0;
  // True when the whole chain is a single ByteLevel decoder: decoding is then
  // concatenating per-token bytes, which the tokenizer precomputes.
  virtual bool pure_byte_level() const { return false; }
};

std::unique_ptr<Decoder> make_decoder(const nlohmann::json& spec);

// The bytes a byte-level vocabulary string stands for (HF rule: a token
// with any character outside the byte map contributes its UTF-8 as is).
std::string byte_level_token_bytes(const std::string& token);

}  // namespace areal::tokenizer
