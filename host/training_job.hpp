// The training job of `areal-host run`: train and algorithm instances next
// to the running inference backend, gateway and (inline mode) workflow, the
// online agent command when configured, and the trainer loop.
#pragma once

#include <functional>
#include <string>

#include "core/plugin_host/gateway_sessions.hpp"
#include "core/config/run_config.hpp"
#include "areal/plugin_api.h"
#include "rollout_runner.hpp"

namespace areal::host {

namespace launcher {
class RunLauncher;
}

struct RunningParts {
  areal_inference_ref inference{};
  const areal_workflow_vtable* workflow = nullptr;  // inline mode
  void* workflow_self = nullptr;
  const areal_gateway_vtable* gateway = nullptr;    // may be NULL
  void* gateway_self = nullptr;
  GatewaySessions* sessions = nullptr;              // the gateway's session slots (ABI 1.4), or NULL
  std::string gateway_url;                          // http://HOST:PORT or empty
  launcher::RunLauncher* launcher = nullptr;        // processes started for the run, or NULL
  // The managed service's jobs: the engine serves other jobs too, so the
  // policy is this named adapter (trainer::TrainerOptions::shared_engine).
  std::string shared_engine_adapter;
  // Polled while the trainer waits for sessions: a non-empty reason ends
  // the run (areal::Error CANCELLED with it), e.g. a job paused or cancelled.
  std::function<std::string()> stop_requested;
  bool dashboard = true;  // the run's own dashboard server (dashboard.enabled); the service has its own view
};

// Returns the process exit code; throws areal::Error for plugin failures.
int run_training(const ResolvedConfig& rc, const RolloutPlan& plan, const RunningParts& parts);

}  // namespace areal::host
