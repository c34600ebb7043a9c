// Fuzz target: the request parsers that see every client's bytes. The first
// byte picks the API (Chat Completions, Responses, Anthropic Messages); the
// rest is the HTTP body, taken through the gateway's own body check (UTF-8,
// JSON object) and then that API's parser. A client mistake must come out
// as an error with a code (areal::Error, or the HttpError of the body
// check); anything else - another exception, a crash, a sanitizer report -
// is a bug.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/plugin_host/error.hpp"
#include "http_error.hpp"
#include "plugins/gateway/proxy/anthropic.hpp"
#include "plugins/gateway/proxy/chat_request.hpp"
#include "plugins/gateway/proxy/responses.hpp"
#include "request.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const int api = data[0] % 3;
  const std::string body(reinterpret_cast<const char*>(data + 1), size - 1);
  try {
    const auto json = areal::gateway::parse_json_object(body, "application/json");
    if (api == 0) areal::proxy::parse_chat_request(json);
    if (api == 1) areal::proxy::responses_to_chat_request(json);
    if (api == 2) areal::proxy::anthropic_to_chat_request(json);
  } catch (const areal::gateway::HttpError&) {
  } catch (const areal::Error&) {
  }
  return 0;
}
