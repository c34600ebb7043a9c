#include "core/config/config_loader.hpp"

#include "core/config/run_config.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <stdexcept>

#include <yaml-cpp/yaml.h>

#include "core/plugin_host/error.hpp"
#include "core/text/utf8.hpp"

namespace areal::config {
namespace {

// YAML 1.2 core schema resolution for plain scalars.
Json plain_scalar(const std::string& s) {
  static const std::regex kNull("^(~|null|Null|NULL|)$");
  static const std::regex kTrue("^(true|True|TRUE)$");
  static const std::regex kFalse("^(false|False|FALSE)$");
  static const std::regex kInt("^[-+]?[0-9]+$");
  static const std::regex kFloat("^[-+]?(\\.[0-9]+|[0-9]+(\\.[0-9]*)?)([eE][-+]?[0-9]+)?$");
  if (std::regex_match(s, kNull)) return nullptr;
  if (std::regex_match(s, kTrue)) return true;
  if (std::regex_match(s, kFalse)) return false;
  if (std::regex_match(s, kInt)) {
    try {
      return std::stoll(s);
    } catch (const std::out_of_range&) {
      return s;  // too large for int64: keep the text rather than lose digits
    }
  }
  if (std::regex_match(s, kFloat)) {
    try {
      return std::stod(s);
    } catch (const std::out_of_range&) {  // found by fuzz_config: this escaped as a crash
      throw Error(AREAL_CODE_INVALID_ARGUMENT, "the number " + (s.size() > 40 ? s.substr(0, 40) + "..." : s) + " is out of range for a double");
    }
  }
  return s;
}

// A scalar's text as yaml-cpp decodes it: control bytes in a file that is
// UTF-8 can come out as bytes that are not (found by fuzz_config).
const std::string& utf8_scalar(const YAML::Node& node, const std::string& source) {
  const std::string& s = node.Scalar();
  if (text::first_invalid_utf8(s) != std::string::npos) {
    const auto m = node.Mark();
    throw Error(AREAL_CODE_INVALID_ARGUMENT, source + ":" + std::to_string(m.line + 1) + ":" + std::to_string(m.column + 1) +
                                                 ": the value is not valid UTF-8 once its escapes are decoded");
  }
  return s;
}

Json convert(const YAML::Node& node, const std::string& source) {
  switch (node.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined: return nullptr;
    case YAML::NodeType::Scalar:
      // yaml-cpp tags quoted scalars "!" and plain ones "?".
      if (node.Tag() == "!") return utf8_scalar(node, source);
      return plain_scalar(utf8_scalar(node, source));
    case YAML::NodeType::Sequence: {
      Json arr = Json::array();
      for (const auto& item : node) arr.push_back(convert(item, source));
      return arr;
    }
    case YAML::NodeType::Map: {
      Json obj = Json::object();
      for (const auto& kv : node) {
        if (!kv.first.IsScalar()) {
          auto m = kv.first.Mark();
          throw Error(AREAL_CODE_INVALID_ARGUMENT, source + ":" + std::to_string(m.line + 1) + ":" +
                                                       std::to_string(m.column + 1) + ": map keys must be scalars");
        }
        const std::string key = utf8_scalar(kv.first, source);
        if (obj.contains(key)) {
          auto m = kv.first.Mark();
          throw Error(AREAL_CODE_INVALID_ARGUMENT, source + ":" + std::to_string(m.line + 1) + ":" +
                                                       std::to_string(m.column + 1) + ": duplicate key '" + key + "'");
        }
        obj[key] = convert(kv.second, source);
      }
      return obj;
    }
  }
  return nullptr;
}

}  // namespace

Json yaml_to_json(const std::string& yaml_text, const std::string& source_name) {
  // YAML is Unicode text; a config value that is not would break every JSON
  // that carries it later (the plugin's config, error messages).
  if (const size_t bad = text::first_invalid_utf8(yaml_text); bad != std::string::npos) {
    const size_t line_start = yaml_text.rfind('\n', bad == 0 ? 0 : bad - 1);
    const size_t line = static_cast<size_t>(std::count(yaml_text.begin(), yaml_text.begin() + static_cast<std::ptrdiff_t>(bad), '\n')) + 1;
    const size_t column = bad - (line_start == std::string::npos ? 0 : line_start + 1) + 1;
    throw Error(AREAL_CODE_INVALID_ARGUMENT, source_name + ":" + std::to_string(line) + ":" + std::to_string(column) +
                                                 ": not valid UTF-8 (byte " + std::to_string(bad) + ")");
  }
  try {
    YAML::Node root = YAML::Load(yaml_text);
    return convert(root, source_name);
  } catch (const YAML::Exception& e) {
    throw Error(AREAL_CODE_INVALID_ARGUMENT, source_name + ":" + std::to_string(e.mark.line + 1) + ":" +
                                                 std::to_string(e.mark.column + 1) + ": " + e.msg);
  }
}

namespace {

// Base keys, then the file's over them: mappings merge key by key, anything
// else replaces. A section naming another plugin than the base's replaces
// the base's section whole: its keys belonged to that other plugin.
void merge_over(Json& base, const Json& top, bool top_level) {
  for (auto it = top.begin(); it != top.end(); ++it) {
    const Json& v = it.value();
    if (v.is_null() && base.contains(it.key())) continue;  // an empty section (all keys commented out) changes nothing
    // The base's plugin is its `plugin` key, or the section's default when it names none.
    const auto base_plugin = [&]() -> Json {
      const Json& b = base[it.key()];
      if (b.contains("plugin")) return b["plugin"];
      for (const auto& s : plugin_sections())
        if (it.key() == s.name && s.default_plugin[0] != '\0') return Json(s.default_plugin);
      return Json();
    };
    const bool other_plugin = top_level && v.is_object() && base.contains(it.key()) && base[it.key()].is_object() && v.contains("plugin") &&
                              !base_plugin().is_null() && base_plugin() != v["plugin"];
    if (v.is_object() && base.contains(it.key()) && base[it.key()].is_object() && !other_plugin)
      merge_over(base[it.key()], v, false);
    else
      base[it.key()] = v;
  }
}

Json load_file_with_extends(const std::string& path, int depth) {
  std::ifstream in(path);
  if (!in) throw Error(AREAL_CODE_NOT_FOUND, "cannot read config file '" + path + "'");
  std::stringstream ss;
  ss << in.rdbuf();
  Json j = yaml_to_json(ss.str(), path);
  if (j.is_null()) j = Json::object();  // an empty file is an empty config
  if (!j.is_object()) throw Error(AREAL_CODE_INVALID_ARGUMENT, path + ": the top level must be a mapping");
  if (!j.contains("extends")) return j;
  if (!j["extends"].is_string()) throw Error(AREAL_CODE_INVALID_ARGUMENT, path + ": 'extends' names one config file");
  if (depth >= 8) throw Error(AREAL_CODE_INVALID_ARGUMENT, path + ": 'extends' chains deeper than 8 files (a cycle?)");
  std::filesystem::path base_path(j["extends"].get<std::string>());
  if (base_path.is_relative()) base_path = std::filesystem::path(path).parent_path() / base_path;
  Json base = load_file_with_extends(base_path.lexically_normal().string(), depth + 1);
  j.erase("extends");
  merge_over(base, j, true);
  return base;
}

}  // namespace

Json load_yaml_file(const std::string& path) { return load_file_with_extends(path, 0); }

void apply_override(Json& config, const std::string& assignment) {
  if (const size_t bad = text::first_invalid_utf8(assignment); bad != std::string::npos)
    throw Error(AREAL_CODE_INVALID_ARGUMENT, "an override is not valid UTF-8 (byte " + std::to_string(bad) + ")");
  auto eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0)
    throw Error(AREAL_CODE_INVALID_ARGUMENT, "override '" + assignment + "' must look like dotted.key=value");
  const std::string key = assignment.substr(0, eq);
  const std::string text = assignment.substr(eq + 1);
  set_dotted(config, key, yaml_to_json(text, "override '" + key + "'"));
}

void set_dotted(Json& config, const std::string& key, Json value) {
  Json* node = &config;
  size_t start = 0;
  while (true) {
    size_t dot = key.find('.', start);
    std::string part = key.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (part.empty()) throw Error(AREAL_CODE_INVALID_ARGUMENT, "override key '" + key + "' has an empty part");
    if (!node->is_object()) {
      if (!node->is_null())
        throw Error(AREAL_CODE_INVALID_ARGUMENT, "override '" + key + "': '" + key.substr(0, start - 1) +
                                                     "' is not a mapping");
      *node = Json::object();
    }
    node = &(*node)[part];
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  *node = std::move(value);
}

const Json* find_dotted(const Json& config, const std::string& dotted_key) {
  const Json* node = &config;
  if (dotted_key.empty()) return node;
  size_t start = 0;
  while (true) {
    size_t dot = dotted_key.find('.', start);
    std::string part = dotted_key.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (!node->is_object() || !node->contains(part)) return nullptr;
    node = &(*node)[part];
    if (dot == std::string::npos) return node;
    start = dot + 1;
  }
}

}  // namespace areal::config
