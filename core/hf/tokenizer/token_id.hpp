// A token id read from tokenizer.json: a JSON integer in [0, kMaxTokenId].
// Anything else (a float, 5e22, a negative number) is a clear error, never a
// narrowing conversion (undefined behaviour) or a vocabulary-sized allocation.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "core/plugin_host/error.hpp"

namespace areal::tokenizer {

inline constexpr int64_t kMaxTokenId = int64_t{1} << 24;  // real vocabularies stay far below (Qwen3: 151,669)

inline int32_t token_id(const nlohmann::json& v, const std::string& what) {
  if (!v.is_number_integer() || v.get<int64_t>() < 0 || (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(kMaxTokenId)) ||
      v.get<int64_t>() > kMaxTokenId)
    throw Error(AREAL_CODE_INVALID_ARGUMENT, "tokenizer.json: " + what + " must be a token id (an integer in [0, " + std::to_string(kMaxTokenId) +
                                                 "]), got " + v.dump());
  return static_cast<int32_t>(v.get<int64_t>());
}

}  // namespace areal::tokenizer
