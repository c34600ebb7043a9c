// The areal_host_api table that the host hands to every plugin.
#pragma once

#include <nlohmann/json.hpp>

#include "areal/abi.h"

namespace areal {

// The process-wide table (static storage; valid for the process lifetime).
const areal_host_api* host_api();

// Sets the effective config that areal_host_api.config_get reads.
void set_effective_config(const nlohmann::json& config);

}  // namespace areal
