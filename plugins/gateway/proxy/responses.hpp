// OpenAI Responses API <-> the proxy's chat request and result.
//
// Input: a string, or items — messages (input_text / output_text parts),
// reasoning items, function_call and function_call_output items — plus
// `instructions`; what a text model cannot render is dropped and noted. Items echoed back from an earlier response re-convert to
// the same assistant message that was recorded, so parent matching holds.
// Output: reasoning (summary_text), message (output_text) and function_call
// items; usage with reasoning_tokens.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "plugins/gateway/proxy/chat_service.hpp"

namespace areal::proxy {

// `history`: the conversation of the response named by
// previous_response_id (its messages without its instructions, then its
// reply), or null. Throws areal::Error: INVALID_ARGUMENT naming the field,
// NOT_FOUND for a conversation or stored-prompt reference.
ChatRequest responses_to_chat_request(const nlohmann::ordered_json& body, const nlohmann::ordered_json& history = nullptr);

// The id of an output item of response `response_id` ("resp_<hex>"):
// `kind` ("rs", "msg") + "_" + the response id's hex, so a streamed item
// and the final response's copy of it carry the same id.
std::string response_item_id(const std::string& response_id, const std::string& kind);

// Output items of a finished call (recorded under its response id, c.id);
// item ids are response_item_id(c.id, ...), function calls "fc_" + the call
// id's hex.
nlohmann::ordered_json responses_output(const ChatService::Completed& c);

// The response object, its id the call's (c.id). `status` "completed", or
// "incomplete" when the output hit max_output_tokens.
nlohmann::ordered_json responses_object(const ChatService::Completed& c, const ChatRequest& req, const nlohmann::ordered_json& body,
                                        const std::string& model, int64_t created_at);

// Reasoning tokens: those up to and including </think> (0 without reasoning).
size_t reasoning_tokens(const ChatService::Completed& c, const tokenizer::Tokenizer& tok);

}  // namespace areal::proxy
