// Reading requests: bounded JSON bodies and credentials.
#pragma once

#include <string>

#include <Poco/Net/HTTPServerRequest.h>
#include <nlohmann/json.hpp>

namespace areal::gateway {

// Reads the body (HttpError 413 beyond max_bytes) and parses a JSON object
// (400 otherwise). An empty body is an empty object.
nlohmann::ordered_json read_json_object(Poco::Net::HTTPServerRequest& request, size_t max_bytes);

// `Authorization: Bearer <token>` (case-insensitive scheme) or `x-api-key`;
// HttpError 401 with AReaL's message when neither is present.
std::string bearer_token(const Poco::Net::HTTPServerRequest& request);

}  // namespace areal::gateway
