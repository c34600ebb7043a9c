// One call of a gateway's control slot (ABI 1.1) from the host: a JSON
// request object in, the parsed JSON answer out.
#pragma once

#include <nlohmann/json.hpp>

#include "areal/plugin_api.h"

namespace areal {

// Throws areal::Error with the gateway's code and message when it fails,
// UNSUPPORTED when the gateway has no control slot.
nlohmann::json call_gateway_control(const areal_gateway_vtable& gateway, void* self, const nlohmann::json& request);

}  // namespace areal
