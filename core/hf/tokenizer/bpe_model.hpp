// The BPE model of tokenizer.json ("model": {"type": "BPE", ...}).
//
// Byte-level mode (when the pipeline has a ByteLevel pre-tokenizer): a
// piece's raw bytes map to their byte tokens through a 256-entry table, then
// merges apply by rank. Character mode: each character is looked up as is,
// with unk_token / byte_fallback for unknown ones. Results are cached per
// piece.
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

namespace areal::tokenizer {

// GPT-2's reversible byte <-> printable character map.
const std::array<char32_t, 256>& byte_to_char();

// A byte-level vocabulary string -> the raw bytes it stands for; false if a
// character is outside the byte map (such tokens never come from raw bytes).
bool byte_level_to_raw(const std::string& token, std::string& raw);

class BpeModel {
 public:
  // Throws areal::Error for a malformed or unsupported model.
  BpeModel(const nlohmann::json& spec, bool byte_level);

  // Appends the ids of one pre-tokenized piece.
  void encode(std::string_view piece, std::vector<int32_t>& out) const;

  size_t vocab_size() const { return id_to_token_.size(); }
  // The vocabulary string of an id ("" if unknown), as in tokenizer.json.
  const std::string& token(int32_t id) const;
  int32_t id_of(const std::string& token) const;  // -1 if absent
  bool byte_level() const { return byte_level_; }

 private:
  void merge(std::vector<int32_t>& symbols) const;
  void encode_uncached(std::string_view piece, std::vector<int32_t>& out) const;

  bool byte_level_;
  bool ignore_merges_ = false;
  bool byte_fallback_ = false;
  int32_t unk_id_ = -1;
  std::string continuing_subword_prefix_;
  std::string end_of_word_suffix_;
  std::unordered_map<std::string, int32_t> vocab_;      // token string -> id
  std::vector<std::string> id_to_token_;
  std::unordered_map<std::string, int32_t> raw_vocab_;  // byte-level: raw bytes -> id
  std::array<int32_t, 256> byte_ids_{};                 // byte-level: byte -> id (-1 if absent)
  struct Merge {
    int32_t rank;
    int32_t id;
  };
  std::unordered_map<uint64_t, Merge> merges_;  // (left id, right id) -> (rank, merged id)

  // Piece -> ids, sharded to keep contention low when many threads encode.
  static constexpr size_t kShards = 16;
  static constexpr size_t kShardCapacity = 8192;
  struct Shard {
    std::mutex mutex;
    std::unordered_map<std::string, std::vector<int32_t>> map;
  };
  mutable std::array<Shard, kShards> cache_;
};

}  // namespace areal::tokenizer
