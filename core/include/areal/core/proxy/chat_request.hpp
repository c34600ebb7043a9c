// An OpenAI chat completions request, validated. Every field the proxy
// cannot honour is a clear INVALID_ARGUMENT naming the parameter (HTTP 400),
// never silently dropped (AReaL drops seed, top_k, logprobs, ...).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace areal::proxy {

struct ChatRequest {
  nlohmann::ordered_json messages;
  nlohmann::ordered_json tools;            // null when absent
  std::string tool_choice = "auto";        // "none" | "auto" | "required" (named choice: its name)
  float temperature = 1.0f;
  float top_p = 1.0f;
  int32_t top_k = 0;
  std::optional<int64_t> max_tokens;       // max_tokens or max_completion_tokens
  std::vector<std::string> stop;
  std::optional<uint64_t> seed;
  bool logprobs = false;
  int32_t top_logprobs = 0;
  bool store = true;                       // false: served but not recorded for training
  bool stream = false;
  bool stream_usage = false;               // stream_options.include_usage
  nlohmann::ordered_json chat_template_kwargs = nlohmann::ordered_json::object();
  std::string model;
  std::string tool_call_id_prefix = "call_";  // "toolu_" when serving Anthropic's API
};

// Parses a request body. Throws areal::Error(INVALID_ARGUMENT) with
// "<param>: <problem>" messages.
ChatRequest parse_chat_request(const nlohmann::ordered_json& body);

}  // namespace areal::proxy
