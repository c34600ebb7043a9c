#include "http_error.hpp"

#include <cstdint>

#include <nlohmann/json.hpp>

#include "areal/abi.h"
#include "core/recorder/journal.hpp"
#include "core/recorder/recorder.hpp"

namespace areal::gateway {

std::string openai_error_body(const std::string& message, const std::string& type, const std::string& code) {
  // replace: a message quoting the client's bytes must not make the error itself unsendable.
  return nlohmann::json{{"error", {{"message", message}, {"type", type}, {"param", nullptr}, {"code", code}}}}.dump(
      -1, ' ', false, nlohmann::json::error_handler_t::replace);
}

int http_status_for(int32_t c) {
  switch (c) {
    case AREAL_CODE_INVALID_ARGUMENT: return 400;
    case AREAL_CODE_UNAUTHENTICATED: return 401;
    case AREAL_CODE_PERMISSION_DENIED: return 403;
    case AREAL_CODE_NOT_FOUND: return 404;
    case AREAL_CODE_ALREADY_EXISTS:
    case AREAL_CODE_FAILED_PRECONDITION: return 409;
    case AREAL_CODE_RESOURCE_EXHAUSTED: return 429;
    case AREAL_CODE_UNSUPPORTED: return 400;
    case AREAL_CODE_UNAVAILABLE: return 502;
    case AREAL_CODE_DEADLINE_EXCEEDED: return 504;
    default: return 500;
  }
}

int http_status_of(const sdk::Error& e) {
  if (dynamic_cast<const recorder::StateUnavailable*>(&e) != nullptr) return 503;
  if (dynamic_cast<const recorder::SessionClosed*>(&e) != nullptr) return 410;  // as an ended session's key is answered
  return http_status_for(e.code());
}

std::string error_type_for(int status) {
  if (status == 401) return "authentication_error";
  if (status == 403) return "permission_error";
  if (status == 404) return "not_found_error";
  if (status == 429) return "rate_limit_error";
  if (status >= 500) return "server_error";
  return "invalid_request_error";
}

std::string error_code_for(int status) {
  switch (status) {
    case 400: return "invalid_request";
    case 401: return "invalid_api_key";
    case 403: return "forbidden";
    case 404: return "not_found";
    case 405: return "method_not_allowed";
    case 408: return "request_timeout";
    case 409: return "conflict";
    case 410: return "session_ended";
    case 413: return "request_too_large";
    case 414: return "uri_too_long";
    case 417: return "expectation_failed";
    case 431: return "headers_too_large";
    case 415: return "unsupported_media_type";
    case 422: return "unprocessable_entity";
    case 429: return "no_capacity";
    case 502: return "backend_unavailable";
    case 503: return "unavailable";
    case 504: return "timeout";
    default: return "internal_error";
  }
}

void send_json(Poco::Net::HTTPServerResponse& response, int status, const std::string& body) {
  response.setStatusAndReason(static_cast<Poco::Net::HTTPResponse::HTTPStatus>(status));  // "401 Unauthorized", not Poco's default "401 OK"
  response.setContentType("application/json");
  response.setContentLength(static_cast<std::streamsize>(body.size()));
  response.send() << body;
}

void send_error(Poco::Net::HTTPServerResponse& response, int status, const std::string& message,
                const std::string& type, const std::string& code) {
  send_json(response, status, openai_error_body(message, type, code));
}

}  // namespace areal::gateway
