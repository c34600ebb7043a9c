// Reading YAML configs into JSON and applying `dotted.key=value` overrides.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace areal::config {

using Json = nlohmann::json;

// Parses YAML text into JSON. Plain scalars become booleans, integers,
// floats or null where YAML 1.2 core schema says so; quoted scalars stay
// strings. Throws areal::Error(INVALID_ARGUMENT) with line and column.
Json yaml_to_json(const std::string& yaml_text, const std::string& source_name);

// Reads and parses a YAML file; errors name the file. `extends: OTHER.yaml`
// (relative to the file) loads OTHER first and merges this file over it:
// mappings key by key, other values replace, an empty (null) section changes
// nothing; a section that names another `plugin` than OTHER's section names
// replaces that section whole. Relative paths in either
// file resolve against the directory of the file given to the host.
Json load_yaml_file(const std::string& path);

// Applies "a.b.c=value" (value parsed as a YAML scalar or flow collection,
// so `x=[1,2]` and `x={k: v}` work). Creates intermediate objects. Throws
// INVALID_ARGUMENT for a malformed override.
void apply_override(Json& config, const std::string& assignment);
// Sets a dotted key to a value (what apply_override does once the value is
// parsed). Throws INVALID_ARGUMENT for an empty part or a non-mapping on the way.
void set_dotted(Json& config, const std::string& key, Json value);

// Looks up a dotted key; returns nullptr when absent.
const Json* find_dotted(const Json& config, const std::string& dotted_key);

}  // namespace areal::config
