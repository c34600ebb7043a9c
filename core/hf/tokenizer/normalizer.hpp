// tokenizer.json "normalizer": NFC, NFD, NFKC, NFKD, Lowercase, Strip,
// Replace, Prepend and Sequence. Invalid UTF-8 bytes pass through untouched.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace areal::tokenizer {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual void apply(std::string& text) const = 0;
};

// Builds from the JSON node (null -> nullptr). Throws areal::Error naming an
// unsupported type.
std::unique_ptr<Normalizer> make_normalizer(const nlohmann::json& spec);

}  // namespace areal::tokenizer
