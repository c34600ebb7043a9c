// OpenAI-style error bodies, the areal_code -> HTTP status mapping, and an
// exception carrying an exact HTTP status for client mistakes.
#pragma once

#include <stdexcept>
#include <string>
#include <cstdint>

#include <Poco/Net/HTTPServerResponse.h>

#include "areal/sdk.hpp"

namespace areal::gateway {

// Thrown by route handlers for a response with a specific status.
struct HttpError : std::runtime_error {
  HttpError(int status, const std::string& message, std::string code = "")
      : std::runtime_error(message), status(status), code(std::move(code)) {}
  int status;
  std::string code;  // OpenAI error "code"; derived from the status when empty
};

// {"error": {"message": ..., "type": ..., "param": null, "code": ...}}
std::string openai_error_body(const std::string& message, const std::string& type, const std::string& code);

// HTTP status for an areal_code (docs/http-api.md has the table).
int http_status_for(int32_t areal_code);
// The HTTP status for an error thrown while serving: its code's, except 503
// for a change the state directory could not commit (the client may retry).
int http_status_of(const sdk::Error& e);

// The OpenAI error type and a default code for a status.
std::string error_type_for(int status);
std::string error_code_for(int status);

// Sends a JSON error response with the given status.
void send_error(Poco::Net::HTTPServerResponse& response, int status, const std::string& message,
                const std::string& type, const std::string& code);

// Sends a JSON body with the given status.
void send_json(Poco::Net::HTTPServerResponse& response, int status, const std::string& body);

}  // namespace areal::gateway
