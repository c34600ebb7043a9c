// Anthropic Messages API <-> the proxy's chat request and result.
//
// Request: system (string or text blocks), messages with text, thinking,
// tool_use and tool_result blocks and system entries anywhere, client tools
// (input_schema), tool_choice (any/tool force a call), stop_sequences,
// thinking / output_config.effort -> enable_thinking. What a text model
// cannot render (images, documents, server tools) is dropped and noted
// (api_fields.hpp). Result: content blocks (thinking, text, tool_use with
// ids "toolu_..."), stop_reason, stop_sequence, usage.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "plugins/gateway/proxy/chat_service.hpp"

namespace areal::proxy {

// Throws areal::Error(INVALID_ARGUMENT) naming the field.
ChatRequest anthropic_to_chat_request(const nlohmann::ordered_json& body);

// Anthropic's stop_reason for a finished call.
std::string anthropic_stop_reason(const ChatService::Completed& c, const ChatRequest& req);

// The stop string that ended the call (stop_reason "stop_sequence"), else null.
nlohmann::ordered_json anthropic_stop_sequence(const ChatService::Completed& c);

// The content blocks of a finished call.
nlohmann::ordered_json anthropic_content(const ChatService::Completed& c);

nlohmann::ordered_json anthropic_message(const ChatService::Completed& c, const ChatRequest& req, const std::string& model);

}  // namespace areal::proxy
