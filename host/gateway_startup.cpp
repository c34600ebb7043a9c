#include "gateway_startup.hpp"

#include <cstdint>

#include "config_loading.hpp"
#include "core/plugin_host/error.hpp"
#include "core/plugin_host/string_writer.hpp"

namespace areal::host {

void RunningGateway::stop() {
  if (instance && vtable) warn_if_status(vtable->stop(instance->self()), "gateway stop");
}

std::unique_ptr<RunningGateway> start_gateway(const ResolvedConfig& rc, const areal_inference_ref* inference, const GatewayStart& how) {
  auto g = std::make_unique<RunningGateway>();
  g->services = make_services(g->name);
  g->services.inference = inference;
  Json gw = Json::parse(rc.section_json("gateway"));
  // AReaL's rollout.openai.* names, applied to the gateway they configure.
  const auto& oa = rc.host.rollout.openai;
  if (oa.export_style) gw["export_style"] = *oa.export_style;
  if (oa.admin_api_key) gw["admin_api_key"] = *oa.admin_api_key;
  if (oa.session_timeout_seconds) gw["session_timeout_seconds"] = *oa.session_timeout_seconds;
  if (how.training) gw["turn_discount"] = oa.turn_discount;
  // Online training: sessions start only as the trainer grants capacity.
  if (how.online && gw.value("capacity", int64_t{-1}) < 0) gw["capacity"] = 0;
  for (const auto& [k, v] : how.extra.items()) gw[k] = v;
  // Durable by default where sessions come from outside (online): inline
  // episodes are re-run from the dataset on resume instead.
  resolve_gateway_state_dir(rc, gw, how.online, how.fresh_training_run);
  const auto& plugin = rc.plugins.at("gateway");
  g->instance = std::make_unique<PluginInstance>(plugin, gw.dump(), &g->services);
  g->vtable = plugin->gateway();
  if (GatewaySessions::supported(g->vtable)) {
    g->sessions = std::make_unique<GatewaySessions>(g->vtable, g->instance->self());
  } else if (how.online) {
    throw Error(AREAL_CODE_UNSUPPORTED, "rollout.openai.mode online needs a gateway with the ABI 1.4 session slots; '" + plugin->name() +
                                            "' (ABI " + plugin->abi_version() + ") has none");
  }
  StringCollector url;
  throw_if_status(g->vtable->start(g->instance->self(), url.writer()), "gateway start");
  g->url = url.text;
  return g;
}

}  // namespace areal::host
