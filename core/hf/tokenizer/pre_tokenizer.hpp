// tokenizer.json "pre_tokenizer": Split (all five behaviours, invert),
// ByteLevel, Digits, Whitespace, WhitespaceSplit and Sequence.
#pragma once

#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace areal::tokenizer {

// The pieces of one text segment. Views point into the caller's text or
// into `arena` (for pieces a pre-tokenizer had to rewrite).
struct Pieces {
  std::vector<std::string_view> views;
  std::deque<std::string> arena;
};

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Replaces `pieces.views` with the finer split.
  virtual void apply(Pieces& pieces) const = 0;
  // True for ByteLevel: the model then works on raw bytes.
  virtual bool byte_level() const { return false; }
};

std::unique_ptr<PreTokenizer> make_pre_tokenizer(const nlohmann::json& spec);

}  // namespace areal::tokenizer
