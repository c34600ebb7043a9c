// The areal_code an expression throws (AREAL_CODE_OK when it throws none),
// for tests that check which error a call reports.
#pragma once

#include <functional>
#include <cstdint>

#include "core/plugin_host/error.hpp"

inline int32_t code_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const areal::Error& e) {
    return e.code();
  }
  return AREAL_CODE_OK;
}
