// Starting the configured gateway in front of an inference backend: shared by
// `areal-host run` and the managed service's jobs (host/service).
#pragma once

#include <memory>
#include <string>

#include "core/config/run_config.hpp"
#include "core/plugin_host/gateway_sessions.hpp"
#include "core/plugin_host/plugin_instance.hpp"
#include "areal/plugin_api.h"

namespace areal::host {

// A started gateway. Not movable: its services name this object's storage.
struct RunningGateway {
  std::string name = "gateway";
  areal_services services{};
  std::unique_ptr<PluginInstance> instance;
  std::unique_ptr<GatewaySessions> sessions;  // its session slots (ABI 1.4), or NULL
  const areal_gateway_vtable* vtable = nullptr;
  std::string url;  // http://HOST:PORT
  void* self() const { return instance->self(); }
  void stop();      // logs a failure; safe to call twice
};

struct GatewayStart {
  bool training = false, online = false;
  bool fresh_training_run = false;  // a previous run's state dir is moved aside
  Json extra = Json::object();      // keys set over the gateway section (the service's per-job ones)
};

// Creates rc's gateway section with the AReaL rollout.openai names applied,
// its state dir resolved (durable when online), and starts it. Throws
// areal::Error; online mode without session slots is UNSUPPORTED.
std::unique_ptr<RunningGateway> start_gateway(const ResolvedConfig& rc, const areal_inference_ref* inference, const GatewayStart& how);

}  // namespace areal::host
