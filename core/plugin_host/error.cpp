#include "core/plugin_host/error.hpp"

#include <cstdint>

#include "core/telemetry/logging.hpp"

// The concrete status object behind the opaque C type. Only the host
// allocates it, so only the host's allocator ever frees it.
struct areal_status {
  int32_t code;
  std::string message;
};

namespace areal {

const char* code_name(int32_t code) {
  switch (code) {
    case AREAL_CODE_OK: return "OK";
    case AREAL_CODE_INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case AREAL_CODE_NOT_FOUND: return "NOT_FOUND";
    case AREAL_CODE_UNSUPPORTED: return "UNSUPPORTED";
    case AREAL_CODE_UNAVAILABLE: return "UNAVAILABLE";
    case AREAL_CODE_CANCELLED: return "CANCELLED";
    case AREAL_CODE_INTERNAL: return "INTERNAL";
    case AREAL_CODE_ABI_MISMATCH: return "ABI_MISMATCH";
    case AREAL_CODE_ALREADY_EXISTS: return "ALREADY_EXISTS";
    case AREAL_CODE_FAILED_PRECONDITION: return "FAILED_PRECONDITION";
    case AREAL_CODE_RESOURCE_EXHAUSTED: return "RESOURCE_EXHAUSTED";
    case AREAL_CODE_UNAUTHENTICATED: return "UNAUTHENTICATED";
    case AREAL_CODE_PERMISSION_DENIED: return "PERMISSION_DENIED";
    case AREAL_CODE_DEADLINE_EXCEEDED: return "DEADLINE_EXCEEDED";
    default: return "UNKNOWN";
  }
}

areal_status* make_status(int32_t code, std::string_view message) {
  // A status with code OK would read as an error to callers that only test
  // for NULL; record it as INTERNAL so the bug is visible.
  if (code == AREAL_CODE_OK) return new areal_status{AREAL_CODE_INTERNAL, "status created with code OK: " + std::string(message)};
  return new areal_status{code, std::string(message)};
}

void free_status(areal_status* status) { delete status; }

int32_t status_code(const areal_status* status) { return status == nullptr ? AREAL_CODE_OK : status->code; }

std::string_view status_message(const areal_status* status) {
  return status == nullptr ? std::string_view("") : std::string_view(status->message);  // "": NUL-terminated, as the ABI promises
}

void throw_if_status(areal_status* status, std::string_view context) {
  if (status == nullptr) return;
  StatusPtr owned(status);
  std::string message(context);
  if (!message.empty()) message += ": ";
  message += status_message(status);
  throw Error(status_code(status), message);
}

void warn_if_status(areal_status* status, std::string_view context) {
  if (status == nullptr) return;
  StatusPtr owned(status);
  logging::get("host")->warn("{}: {} ({})", context, status_message(status), code_name(status_code(status)));
}

}  // namespace areal
