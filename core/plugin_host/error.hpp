// Host-side errors: one exception type that carries an areal_code, and the
// glue between it and the C status objects that cross the plugin ABI.
#pragma once

#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <cstdint>

#include "areal/abi.h"
#include "areal/sdk.hpp"

namespace areal {

// The same exception type plugins throw through the SDK: an error with an
// areal_code. (Exceptions never cross the ABI; sharing the type only keeps
// one definition of "an error with a code".)
using Error = sdk::Error;

// The short upper-case name of a code ("INVALID_ARGUMENT").
const char* code_name(int32_t code);

// Creates a host status (what areal_host_api.status_new does).
areal_status* make_status(int32_t code, std::string_view message);
void free_status(areal_status* status);
int32_t status_code(const areal_status* status);
std::string_view status_message(const areal_status* status);

struct StatusDeleter {
  void operator()(areal_status* s) const { free_status(s); }
};
using StatusPtr = std::unique_ptr<areal_status, StatusDeleter>;

// Takes ownership of `status`; throws Error with `context` prefixed when it
// is not NULL.
void throw_if_status(areal_status* status, std::string_view context);

// Takes ownership of `status`; logs a warning naming `context` when it is not
// NULL. For calls whose failure cannot change what happens next (stopping,
// cleaning up after another error) but must still be seen.
void warn_if_status(areal_status* status, std::string_view context);

}  // namespace areal
