// JSON text from outside (client requests, model output, tool-call
// arguments) parsed with a nesting limit. nlohmann's parser itself keeps its
// own stack, but copying, rendering or compiling a parsed value recurses once
// per level: without a limit, a few hundred KB of "[[[[..." overflow the
// thread's stack. Every parse of untrusted JSON goes through here.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace areal::text {

// Containers nested in containers, the outermost counting 1. Real requests
// (tool schemas included) stay below 20; the recursions over parsed values
// are safe far beyond this on an 8 MiB stack.
constexpr size_t kMaxJsonDepth = 128;

struct JsonTooDeep : std::runtime_error {
  explicit JsonTooDeep(size_t limit)
      : std::runtime_error("JSON nests objects and arrays deeper than " + std::to_string(limit) + " levels (the limit)"), limit(limit) {}
  size_t limit;
};

// Parses `text`; throws JsonTooDeep past `max_depth` levels (before building
// them) and nlohmann's parse_error for text that is not JSON.
template <class Json = nlohmann::json>
Json parse_json_bounded(std::string_view text, size_t max_depth = kMaxJsonDepth) {
  using Event = typename Json::parse_event_t;
  // The callback sees the depth of the container that opens (0 for the outermost).
  auto limit = [max_depth](int depth, Event event, Json&) {
    if ((event == Event::object_start || event == Event::array_start) && static_cast<size_t>(depth) >= max_depth) throw JsonTooDeep(max_depth);
    return true;
  };
  return Json::parse(text, limit);
}

// The same, but nullopt-like: a discarded value for text that is not JSON or too deep.
template <class Json = nlohmann::json>
Json parse_json_bounded_or_discarded(std::string_view text, size_t max_depth = kMaxJsonDepth) {
  try {
    return parse_json_bounded<Json>(text, max_depth);
  } catch (const JsonTooDeep&) {
  } catch (const nlohmann::json::exception&) {
  }
  return Json(Json::value_t::discarded);
}

}  // namespace areal::text
