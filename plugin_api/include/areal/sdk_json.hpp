// Optional SDK helper for plugins that use nlohmann_json (Debian
// nlohmann-json3-dev): parse a config or data object, or fail with a clear
// INVALID_ARGUMENT instead of an internal error.
#ifndef AREAL_SDK_JSON_HPP_
#define AREAL_SDK_JSON_HPP_

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "areal/sdk.hpp"

namespace areal::sdk {

// Parses `text` as a JSON object. `what` names it in errors, e.g.
// "token_match: config" -> "token_match: config is not valid JSON: ...".
inline nlohmann::json parse_object(std::string_view text, const std::string& what) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw invalid_argument(what + " is not valid JSON: " + e.what());
  }
  if (!j.is_object()) throw invalid_argument(what + " must be a JSON object, got " + j.dump());
  return j;
}

}  // namespace areal::sdk

#endif  // AREAL_SDK_JSON_HPP_
