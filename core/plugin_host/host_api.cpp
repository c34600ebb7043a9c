#include "core/plugin_host/host_api.hpp"

#include <cstdlib>
#include <mutex>
#include <new>
#include <string>
#include <cstdint>
#include <string_view>
#include <exception>

#include "core/config/config_loader.hpp"
#include "core/plugin_host/error.hpp"
#include "core/telemetry/logging.hpp"
#include "core/telemetry/metrics.hpp"

namespace areal {
namespace {

std::string to_string(areal_str s) { return s.size == 0 ? std::string() : std::string(s.data, s.size); }

std::mutex& config_mutex() {
  static std::mutex m;
  return m;
}
nlohmann::json& effective_config() {
  static nlohmann::json c = nlohmann::json::object();
  return c;
}

// Every slot is noexcept in effect: nothing may unwind into plugin code.
areal_status* status_new(int32_t code, areal_str message) {
  try {
    return make_status(code, std::string_view(message.data == nullptr ? "" : message.data, message.size));
  } catch (...) {
    static areal_status* oom = make_status(AREAL_CODE_RESOURCE_EXHAUSTED, "out of memory creating a status");
    return oom;  // never freed twice in practice: allocation failure here means the process is dying
  }
}
void status_free(areal_status* s) { free_status(s); }
int32_t status_code_slot(const areal_status* s) { return status_code(s); }
areal_str status_message_slot(const areal_status* s) {
  std::string_view m = status_message(s);
  return areal_str{m.data(), m.size()};
}

spdlog::level::level_enum to_spdlog(int32_t level) {
  switch (level) {
    case AREAL_LOG_TRACE: return spdlog::level::trace;
    case AREAL_LOG_DEBUG: return spdlog::level::debug;
    case AREAL_LOG_INFO: return spdlog::level::info;
    case AREAL_LOG_WARN: return spdlog::level::warn;
    case AREAL_LOG_ERROR: return spdlog::level::err;
    default: return spdlog::level::critical;
  }
}

void log_slot(int32_t level, areal_str component, areal_str message) {
  try {
    std::string name = component.size == 0 ? "plugin" : to_string(component);
    logging::get(name)->log(to_spdlog(level), "{}", std::string_view(message.data, message.size));
  } catch (...) {
  }
}

int32_t log_level_slot() {
  switch (logging::level()) {
    case spdlog::level::trace: return AREAL_LOG_TRACE;
    case spdlog::level::debug: return AREAL_LOG_DEBUG;
    case spdlog::level::info: return AREAL_LOG_INFO;
    case spdlog::level::warn: return AREAL_LOG_WARN;
    case spdlog::level::err: return AREAL_LOG_ERROR;
    default: return AREAL_LOG_CRITICAL + 1;  // off: nothing passes
  }
}

void* alloc_slot(size_t size, size_t alignment) {
  if (size == 0) return nullptr;
  if (alignment == 0) alignment = alignof(std::max_align_t);
  if ((alignment & (alignment - 1)) != 0) return nullptr;
  if (alignment < sizeof(void*)) alignment = sizeof(void*);
  void* p = nullptr;
  return posix_memalign(&p, alignment, size) == 0 ? p : nullptr;
}
void free_slot(void* p) { std::free(p); }

void metric_set_slot(areal_str name, double value) {
  try {
    Metrics::global().set(std::string_view(name.data, name.size), value);
  } catch (const std::exception& e) {
    logging::get("metrics")->warn("{}", e.what());
  }
}
void metric_add_slot(areal_str name, double delta) {
  try {
    Metrics::global().add(std::string_view(name.data, name.size), delta);
  } catch (const std::exception& e) {
    logging::get("metrics")->warn("{}", e.what());
  }
}

areal_status* config_get_slot(areal_str key, const areal_writer* out) {
  try {
    if (out == nullptr || out->write == nullptr) return make_status(AREAL_CODE_INVALID_ARGUMENT, "config_get: writer is NULL");
    std::string text;
    {
      std::lock_guard<std::mutex> lock(config_mutex());
      const nlohmann::json* node = config::find_dotted(effective_config(), to_string(key));
      if (node == nullptr) return make_status(AREAL_CODE_NOT_FOUND, "config key '" + to_string(key) + "' is not set");
      text = node->dump();
    }
    return out->write(out->ctx, areal_str{text.data(), text.size()});
  } catch (const std::exception& e) {
    return make_status(AREAL_CODE_INTERNAL, e.what());
  }
}

areal_status* metrics_render_slot(const areal_writer* out) {
  try {
    if (out == nullptr || out->write == nullptr) return make_status(AREAL_CODE_INVALID_ARGUMENT, "metrics_render: writer is NULL");
    std::string text = Metrics::global().render_prometheus();
    return out->write(out->ctx, areal_str{text.data(), text.size()});
  } catch (const std::exception& e) {
    return make_status(AREAL_CODE_INTERNAL, e.what());
  }
}

const areal_host_api kHostApi = {
    /* .struct_size    = */ AREAL_OFFSET_OF_END(areal_host_api, metrics_render),
    /* .abi_major      = */ AREAL_ABI_MAJOR,
    /* .abi_minor      = */ AREAL_ABI_MINOR,
    /* .status_new     = */ &status_new,
    /* .status_free    = */ &status_free,
    /* .status_code    = */ &status_code_slot,
    /* .status_message = */ &status_message_slot,
    /* .log            = */ &log_slot,
    /* .log_level      = */ &log_level_slot,
    /* .alloc          = */ &alloc_slot,
    /* .free           = */ &free_slot,
    /* .metric_set     = */ &metric_set_slot,
    /* .metric_add     = */ &metric_add_slot,
    /* .config_get     = */ &config_get_slot,
    /* .metrics_render = */ &metrics_render_slot,
};

}  // namespace

const areal_host_api* host_api() { return &kHostApi; }

void set_effective_config(const nlohmann::json& config) {
  std::lock_guard<std::mutex> lock(config_mutex());
  effective_config() = config;
}

}  // namespace areal
