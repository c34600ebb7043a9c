// Threads of the host (core/, host/) whose exceptions never end the process:
// the host's twin of areal::sdk::guarded_thread (plugins use that one). An
// exception escaping a thread body is logged (ERROR, under the component)
// and counted (areal_thread_exceptions_total{thread="component"}).
// scripts/check_threads.py keeps every thread of the tree on one of the two.
#pragma once

#include <exception>
#include <string>
#include <thread>
#include <utility>

#include "core/telemetry/logging.hpp"
#include "core/telemetry/metrics.hpp"

namespace areal {

// Runs f, containing what it throws. True when it threw.
template <class F>
bool contain(const std::string& component, F&& f) noexcept {
  std::string what;
  try {
    f();
    return false;
  } catch (const std::exception& e) {
    what = e.what();
  } catch (...) {
    what = "unknown exception";
  }
  try {
    logging::get(component)->error("exception contained (the process goes on): {}", what);
    Metrics::global().add("areal_thread_exceptions_total{thread=\"" + component + "\"}", 1.0);
  } catch (...) {
    // Nothing more can be done without risking the process.
  }
  return true;
}

template <class F>
std::thread guarded_thread(std::string component, F&& body) {
  return std::thread([component = std::move(component), body = std::forward<F>(body)]() mutable { contain(component, body); });
}

}  // namespace areal
