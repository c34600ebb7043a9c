// OpenAI-style error bodies and the areal_code -> HTTP status mapping, so
// every client SDK parses our errors the way it parses OpenAI's.
#pragma once

#include <string>

#include <Poco/Net/HTTPServerResponse.h>

namespace areal::gateway {

// {"error": {"message": ..., "type": ..., "param": null, "code": ...}}
std::string openai_error_body(const std::string& message, const std::string& type, const std::string& code);

// HTTP status for an areal_code (docs/http-api.md has the table).
int http_status_for(int32_t areal_code);

// Sends a JSON error response with the given status.
void send_error(Poco::Net::HTTPServerResponse& response, int status, const std::string& message,
                const std::string& type, const std::string& code);

// Sends a JSON body with the given status.
void send_json(Poco::Net::HTTPServerResponse& response, int status, const std::string& body);

}  // namespace areal::gateway
