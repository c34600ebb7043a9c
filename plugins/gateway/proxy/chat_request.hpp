// An OpenAI chat completions request, validated. Field by field the policy
// is api_fields.hpp's table: honoured, or accepted and ignored (counted);
// only a malformed request is an INVALID_ARGUMENT naming the parameter
// (HTTP 400). The Responses and Anthropic parsers build the same struct.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "plugins/gateway/proxy/api_fields.hpp"

namespace areal::proxy {

struct ChatRequest {
  nlohmann::ordered_json messages;
  nlohmann::ordered_json tools;            // null when absent
  std::string tool_choice = "auto";        // "none" | "auto" | "required" | "function" (forced_tool names it)
  std::string forced_tool;                 // the named function when tool_choice is "function"
  float temperature = 1.0f;
  float top_p = 1.0f;
  int32_t top_k = 0;
  std::optional<int64_t> max_tokens;       // max_tokens or max_completion_tokens
  std::optional<int64_t> max_total_tokens; // prompt + completion cap (AReaL's extension)
  int32_t n = 1;                           // choices (chat completions only)
  std::vector<std::string> stop;
  std::vector<int32_t> stop_token_ids;      // beyond the model's end of turn (SGLang's /generate)
  std::optional<uint64_t> seed;
  bool logprobs = false;
  bool stream = false;
  bool stream_usage = false;               // stream_options.include_usage
  nlohmann::ordered_json chat_template_kwargs = nlohmann::ordered_json::object();
  std::string model;
  std::string tool_call_id_prefix = "call_";  // "toolu_" when serving Anthropic's API
  // What reshapes sampling (ABI 1.3, honoured by the inference backend).
  float frequency_penalty = 0, presence_penalty = 0;
  std::vector<std::pair<int32_t, float>> logit_bias;
  int32_t structured_output = 0;  // areal_structured_output: the reply must be JSON
  std::string json_schema;        // its schema (JSON text) when there is one
  FieldNotes fields;                       // what was accepted without being acted on
  std::set<std::string> dropped_tools;     // names of tools not rendered (hosted, server, custom)
  bool any_tools = false;                  // the request listed tools, rendered or not

  bool tools_enabled() const { return !tools.is_null() && tool_choice != "none"; }
  bool forces_tool_call() const { return !tools.is_null() && (tool_choice == "required" || tool_choice == "function"); }
};

// Parses a request body. Throws areal::Error(INVALID_ARGUMENT) with
// "<param>: <problem>" messages.
ChatRequest parse_chat_request(const nlohmann::ordered_json& body);

// parse_chat_request without turning JSON type errors into INVALID_ARGUMENT
// (the converters call it with a body they built, then map errors once).
ChatRequest parse_chat_request_checked(const nlohmann::ordered_json& body);

// Field helpers shared by the three request parsers.
// A key that is there and not null.
inline bool present(const nlohmann::ordered_json& obj, const char* key) { return obj.contains(key) && !obj[key].is_null(); }
// An optional string field: "" when absent, null or not a string.
inline std::string opt_string(const nlohmann::ordered_json& obj, const char* key) {
  return present(obj, key) && obj[key].is_string() ? obj[key].get<std::string>() : "";
}
// Runs a parser; a JSON type error (a field of the wrong type wherever it is
// read) becomes INVALID_ARGUMENT: the client's mistake, never a 500.
ChatRequest rethrow_type_errors_as_invalid(const std::function<ChatRequest()>& parse);

// Applies a response format in any of the three APIs' shapes: Chat's
// {"type": "json_schema", "json_schema": {"schema": ...}}, Responses'
// text.format {"type": "json_schema", "schema": ...}, Anthropic's
// output_config.format; "json_object" and "text" too. A schema-constrained
// reply starts with the JSON itself, so the template's thinking is off.
void set_response_format(ChatRequest& r, const nlohmann::ordered_json& format, const std::string& param);

// The template's thinking switch for an effort level ("none"/"minimal": off).
bool thinking_for_effort(const std::string& effort);

}  // namespace areal::proxy
