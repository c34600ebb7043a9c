#include "core/telemetry/logging.hpp"

#include <mutex>

#include <spdlog/sinks/stdout_color_sinks.h>

#include "core/plugin_host/error.hpp"

namespace areal::logging {
namespace {

std::mutex& mutex() {
  static std::mutex m;
  return m;
}

// Logs go to stderr so stdout stays clean for machine-readable output
// (`areal-host plugins --json`, `tokenize`).
spdlog::sink_ptr& sink() {
  static spdlog::sink_ptr s = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
  return s;
}

spdlog::level::level_enum& current() {
  static spdlog::level::level_enum l = spdlog::level::info;
  return l;
}

}  // namespace

void set_level(std::string_view name) {
  spdlog::level::level_enum l = spdlog::level::from_str(std::string(name));
  // from_str maps unknown names to "off"; only accept "off" when asked for.
  if (l == spdlog::level::off && name != "off")
    throw Error(AREAL_CODE_INVALID_ARGUMENT, "unknown log level '" + std::string(name) +
                                                 "' (expected trace, debug, info, warn, error, critical or off)");
  std::lock_guard<std::mutex> lock(mutex());
  current() = l;
  spdlog::apply_all([l](const std::shared_ptr<spdlog::logger>& lg) { lg->set_level(l); });
}

spdlog::level::level_enum level() {
  std::lock_guard<std::mutex> lock(mutex());
  return current();
}

std::shared_ptr<spdlog::logger> get(const std::string& component) {
  std::lock_guard<std::mutex> lock(mutex());
  if (auto existing = spdlog::get(component)) return existing;
  auto lg = std::make_shared<spdlog::logger>(component, sink());
  lg->set_level(current());
  lg->set_pattern("[%Y-%m-%d %H:%M:%S.%e] [%^%l%$] [%n] %v");
  spdlog::register_logger(lg);
  return lg;
}

}  // namespace areal::logging
