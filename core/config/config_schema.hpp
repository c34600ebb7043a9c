// Config schemas: one small JSON format used for the host's own keys and for
// each plugin's section (areal_plugin_info.config_schema_json).
//
//   {"type": "object", "keys": {
//      "port": {"type": "integer", "default": 0, "minimum": 0, "maximum": 65535,
//               "doc": "TCP port; 0 picks a free one"},
//      "mode": {"type": "string", "enum": ["a", "b"], "default": "a", "doc": "..."},
//      "tags": {"type": "array", "items": {"type": "string"}, "default": []},
//      "extra": {"type": "object", "doc": "free-form: any keys"}}}
//
// A string key with "format": "path" is a file or folder path: the host
// makes a relative one absolute against the config file's directory.
//
// Types: boolean, integer, number, string, array, object, any. An object
// with "keys" is closed (unknown keys are errors); without "keys" it is
// free-form. A key without "default" is required.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace areal::config {

using Json = nlohmann::json;

// Checks that `schema` itself is well formed; throws areal::Error
// (INVALID_ARGUMENT) naming the offending path.
void check_schema(const Json& schema, const std::string& where);

// Validates `value` against `schema` in place: fills defaults, checks types,
// ranges and enums, rejects unknown keys with the nearest valid one. `path`
// prefixes error messages ("gateway"). Appends every problem to `errors`
// (one line each) instead of stopping at the first.
void validate(const Json& schema, Json& value, const std::string& path, std::vector<std::string>& errors);

// The closest candidate to `word` by edit distance, or "" if none is close
// enough to be a plausible typo.
std::string nearest(const std::string& word, const std::vector<std::string>& candidates);

// Markdown rows "| key | type | default | description |" for every key,
// recursively, each key prefixed with `prefix`.
void describe(const Json& schema, const std::string& prefix, std::string& out);

}  // namespace areal::config
