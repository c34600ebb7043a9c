// Internal helpers shared by the per-kind conformance files.
#pragma once

#include <functional>
#include <string>
#include <cstdint>
#include <memory>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "core/conformance/conformance.hpp"
#include "core/plugin_host/error.hpp"
#include "core/plugin_host/string_writer.hpp"

namespace areal::conformance {

// Thrown by a check to record a failure with a reason.
struct CheckFailed : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// Thrown by a check that cannot run here.
struct CheckSkipped : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// Thrown when the plugin's schema requires keys the run was not given (a
// model folder, server URLs, a command): the check is skipped and the run
// is reported incomplete, never failed.
struct ConfigNeeded : CheckSkipped {
  using CheckSkipped::CheckSkipped;
};

inline void expect(bool ok, const std::string& why) {
  if (!ok) throw CheckFailed(why);
}

class Checker {
 public:
  explicit Checker(ConformanceReport& report) : report_(report) {}
  // Runs one check; any exception becomes a failure naming it.
  void run(const std::string& name, const std::function<void()>& body);

 private:
  ConformanceReport& report_;
};

// The instance config: options.config_json with the plugin's schema defaults.
std::string effective_config(const LoadedPlugin& plugin, const std::string& config_json);

// Calls a slot that returns a status; returns the code (OK for NULL) and
// frees the status.
int32_t code_of(areal_status* status);

void check_inference(const std::shared_ptr<LoadedPlugin>& p, const ConformanceOptions& o, Checker& c);
void check_workflow(const std::shared_ptr<LoadedPlugin>& p, const ConformanceOptions& o, Checker& c);
void check_gateway(const std::shared_ptr<LoadedPlugin>& p, const ConformanceOptions& o, Checker& c);
void check_algorithm(const std::shared_ptr<LoadedPlugin>& p, const ConformanceOptions& o, Checker& c);
void check_train(const std::shared_ptr<LoadedPlugin>& p, const ConformanceOptions& o, Checker& c);

}  // namespace areal::conformance
