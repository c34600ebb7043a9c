// Logging: spdlog loggers named by component ("host", "loader",
// "plugin.mock_inference"), one shared sink and level.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include <spdlog/spdlog.h>

namespace areal::logging {

// Sets the global level from a name (trace, debug, info, warn, error,
// critical, off). Throws areal::Error(INVALID_ARGUMENT) for an unknown name.
void set_level(std::string_view level_name);
spdlog::level::level_enum level();

// The logger for a component; created on first use with the shared sink.
std::shared_ptr<spdlog::logger> get(const std::string& component);

}  // namespace areal::logging
