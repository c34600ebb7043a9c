// Standard base64 (RFC 4648, with padding) of raw bytes: how AReaL's export
// carries tensor buffers in JSON.
#pragma once

#include <string>
#include <string_view>

namespace areal::text {

std::string base64_encode(std::string_view bytes);
// The bytes back; throws areal::Error INVALID_ARGUMENT for text that is not
// padded standard base64.
std::string base64_decode(std::string_view text);

}  // namespace areal::text
