#include "core/config/config_schema.hpp"

#include <algorithm>
#include <set>

#include "core/plugin_host/error.hpp"

namespace areal::config {

namespace {

// A value as an error message quotes it (never throws, whatever its bytes).
std::string shown(const Json& value) { return value.dump(-1, ' ', false, Json::error_handler_t::replace); }

const std::set<std::string> kTypes = {"boolean", "integer", "number", "string", "array", "object", "any"};

std::string join(const std::string& path, const std::string& key) { return path.empty() ? key : path + "." + key; }

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string type_of(const Json& v) {
  switch (v.type()) {
    case Json::value_t::null: return "null";
    case Json::value_t::boolean: return "boolean";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned: return "integer";
    case Json::value_t::number_float: return "number";
    case Json::value_t::string: return "string";
    case Json::value_t::array: return "array";
    case Json::value_t::object: return "object";
    default: return "unknown";
  }
}

bool matches(const std::string& type, const Json& v) {
  if (type == "any") return true;
  if (type == "number") return v.is_number();
  if (type == "integer") return v.is_number_integer();
  return type_of(v) == type;
}

}  // namespace

std::string nearest(const std::string& word, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_d = std::string::npos;
  for (const auto& c : candidates) {
    size_t d = edit_distance(word, c);
    if (d < best_d) best_d = d, best = c;
  }
  // A typo changes a few characters; beyond that the suggestion is noise.
  size_t limit = std::max<size_t>(2, word.size() / 3);
  return best_d <= limit ? best : std::string();
}

void check_schema(const Json& schema, const std::string& where) {
  auto fail = [&](const std::string& m) { throw Error(AREAL_CODE_INVALID_ARGUMENT, "bad config schema at '" + where + "': " + m); };
  if (!schema.is_object()) fail("a schema node must be a JSON object");
  if (!schema.contains("type") || !schema["type"].is_string()) fail("missing \"type\"");
  const std::string type = schema["type"];
  if (!kTypes.count(type)) fail("unknown type '" + type + "'");
  if (schema.contains("keys")) {
    if (type != "object" || !schema["keys"].is_object()) fail("\"keys\" is only for objects and must be an object");
    for (const auto& [k, sub] : schema["keys"].items()) check_schema(sub, join(where, k));
  }
  if (schema.contains("items")) {
    if (type != "array") fail("\"items\" is only for arrays");
    check_schema(schema["items"], where + "[]");
  }
  if (schema.contains("enum") && !schema["enum"].is_array()) fail("\"enum\" must be an array");
  if (schema.contains("default")) {
    Json copy = schema["default"];
    std::vector<std::string> errors;
    if (!copy.is_null()) validate(schema, copy, where, errors);
    if (!errors.empty()) fail("default does not satisfy the schema: " + errors.front());
  }
}

void validate(const Json& schema, Json& value, const std::string& path, std::vector<std::string>& errors) {
  const std::string type = schema.value("type", "any");
  if (!matches(type, value)) {
    // A null default means "unset"; null is then a valid value too.
    if (value.is_null() && schema.contains("default") && schema["default"].is_null()) return;
    errors.push_back("'" + path + "' must be " + (type == "integer" || type == "array" || type == "object" ? "an " : "a ") +
                     type + ", got " + (value.is_null() ? std::string("null (an empty value; quote '' for an empty string)")
                                                         : type_of(value) + " " + shown(value)));
    return;
  }
  if (schema.contains("enum")) {
    const auto& e = schema["enum"];
    if (std::find(e.begin(), e.end(), value) == e.end())
      errors.push_back("'" + path + "' must be one of " + e.dump() + ", got " + shown(value));
  }
  if (value.is_number()) {
    double v = value.get<double>();
    if (schema.contains("minimum") && v < schema["minimum"].get<double>())
      errors.push_back("'" + path + "' must be >= " + schema["minimum"].dump() + ", got " + shown(value));
    if (schema.contains("maximum") && v > schema["maximum"].get<double>())
      errors.push_back("'" + path + "' must be <= " + schema["maximum"].dump() + ", got " + shown(value));
  }
  if (type == "array" && schema.contains("items")) {
    for (size_t i = 0; i < value.size(); ++i)
      validate(schema["items"], value[i], path + "[" + std::to_string(i) + "]", errors);
  }
  if (type == "object" && schema.contains("keys")) {
    const auto& keys = schema["keys"];
    std::vector<std::string> known;
    for (const auto& [k, _] : keys.items()) known.push_back(k);
    for (const auto& [k, _] : value.items()) {
      if (keys.contains(k)) continue;
      std::string hint = nearest(k, known);
      errors.push_back("unknown key '" + join(path, k) + "'" +
                       (hint.empty() ? "" : " (did you mean '" + join(path, hint) + "'?)"));
    }
    for (const auto& [k, sub] : keys.items()) {
      if (!value.contains(k)) {
        if (sub.contains("default")) value[k] = sub["default"];
        else if (sub.value("type", "") == "object" && sub.contains("keys")) value[k] = Json::object();
        else {
          errors.push_back("missing required key '" + join(path, k) + "'");
          continue;
        }
      }
      validate(sub, value[k], join(path, k), errors);
    }
  }
}

void describe(const Json& schema, const std::string& prefix, std::string& out) {
  if (!schema.contains("keys")) return;
  for (const auto& [k, sub] : schema["keys"].items()) {
    const std::string key = join(prefix, k);
    std::string type = sub.value("type", "any");
    if (sub.contains("enum")) type += " " + sub["enum"].dump();
    const bool section = sub.value("type", "") == "object" && sub.contains("keys");
    std::string def = sub.contains("default") ? "`" + sub["default"].dump() + "`" : (section ? "" : "required");
    if (section) type = "section";
    std::string doc = sub.value("doc", "");
    out += "| `" + key + "` | " + type + " | " + def + " | " + doc + " |\n";
    describe(sub, key, out);
  }
}

}  // namespace areal::config
