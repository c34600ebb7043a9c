// Standard base64 (RFC 4648, with padding) of raw bytes: how AReaL's export
// carries tensor buffers in JSON.
#pragma once

#include <string>
#include <string_view>

namespace areal::text {

std::string base64_encode(std::string_view bytes);

}  // namespace areal::text
