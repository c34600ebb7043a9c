// Added tokens (tokenizer.json "added_tokens"): found in the text before the
// model sees it, honouring the lstrip / rstrip / single_word / normalized /
// special flags the way Hugging Face tokenizers does.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

namespace areal::tokenizer {

struct AddedToken {
  int32_t id;
  std::string content;
  bool special, lstrip, rstrip, single_word, normalized;
};

// A span of text: either an added token (id >= 0) or plain text (id -1).
struct Segment {
  std::string_view text;
  int32_t id = -1;
};

class AddedVocabulary {
 public:
  explicit AddedVocabulary(const nlohmann::json& added_tokens);

  // Splits `text` on the added tokens of one phase: normalized == false
  // tokens are matched in the original text, normalized == true ones in the
  // normalized text. With `parse_special` false, special tokens are plain
  // text.
  void split(std::string_view text, bool normalized_phase, bool parse_special, std::vector<Segment>& out) const;

  const AddedToken* by_id(int32_t id) const;
  const AddedToken* by_content(const std::string& content) const;
  const std::vector<AddedToken>& tokens() const { return tokens_; }

 private:
  struct TrieNode {
    std::unordered_map<unsigned char, uint32_t> next;
    int32_t token = -1;  // index into tokens_
  };
  std::vector<TrieNode> trie_;
  bool first_byte_[256] = {};  // bytes that start some added token
  std::vector<AddedToken> tokens_;
  std::unordered_map<int32_t, size_t> by_id_;
  std::unordered_map<std::string, size_t> by_content_;
};

}  // namespace areal::tokenizer
