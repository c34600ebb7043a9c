// Reading requests: bounded JSON bodies and credentials.
#pragma once

#include <chrono>
#include <string>

#include <Poco/Net/HTTPServerRequest.h>
#include <nlohmann/json.hpp>

namespace areal::gateway {

// The whole body (HttpError 413 beyond max_bytes). The server has read it
// already, within its deadlines and size limit; this takes it as a string.
std::string read_body(Poco::Net::HTTPServerRequest& request, size_t max_bytes);

// Parses a body as a JSON object (400, naming the limit, past
// text::kMaxJsonDepth levels of nesting; 415 for a non-JSON content type).
// An empty body is an empty object.
nlohmann::ordered_json parse_json_object(const std::string& body, const std::string& content_type);

// `Authorization: Bearer <token>` (case-insensitive scheme) or `x-api-key`;
// HttpError 401 with AReaL's message when neither is present.
std::string bearer_token(const Poco::Net::HTTPServerRequest& request);

// A session-scoped path, /{session}/<api path> (the agent-workflow seed's
// base URLs): true with the session id or key in `session` and the API path
// (/v1/..., /rl/..., /chat/completions, /responses, /messages, /models) in
// `rest`. False for the gateway's own top-level paths.
bool split_session_path(const std::string& path, std::string& session, std::string& rest);
// Whether path's first segment is one of the gateway's own (v1, rl, chat, health, ...).
bool known_top_segment(const std::string& path);

}  // namespace areal::gateway
