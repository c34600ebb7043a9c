// `areal-host serve`: the gateway and its inference backend, no training.
// How a newcomer tries the API by hand; runs until SIGINT or SIGTERM.
//   areal-host serve [--config FILE.yaml] [--model DIR] [--host H] [--port N] [--admin-key K] [--tokenizer DIR] [key=value ...]
#include <pthread.h>
#include <signal.h>

#include <iostream>
#include <string>
#include <vector>
#include <memory>
#include <exception>

#include "../config_loading.hpp"
#include "core/plugin_host/error.hpp"
#include "core/plugin_host/host_api.hpp"
#include "core/telemetry/logging.hpp"
#include "core/plugin_host/plugin_instance.hpp"
#include "core/plugin_host/string_writer.hpp"
#include "../stop_signals.hpp"
#include "commands.hpp"

namespace areal::host {

int serve(const CommandLine& cl) {
  // Block the stop signals before any plugin starts a thread, then wait for them.
  const sigset_t stop_signals = block_stop_signals();

  std::vector<std::string> overrides;
  if (cl.flags.count("port")) overrides.push_back("gateway.port=" + cl.flags.at("port"));
  if (cl.flags.count("admin-key")) overrides.push_back("gateway.admin_api_key='" + cl.flags.at("admin-key") + "'");
  if (cl.flags.count("tokenizer")) overrides.push_back("gateway.tokenizer='" + cl.flags.at("tokenizer") + "'");
  if (cl.flags.count("host")) overrides.push_back("gateway.host='" + cl.flags.at("host") + "'");
  // --model DIR: serve a Hugging Face folder with the built-in CPU engine
  // (`local`, built where libtorch is installed) and the folder's tokenizer.
  if (cl.flags.count("model")) {
    overrides.push_back("inference.plugin=local");
    overrides.push_back("inference.model_path='" + cl.flags.at("model") + "'");
    if (!cl.flags.count("tokenizer")) overrides.push_back("gateway.tokenizer='" + cl.flags.at("model") + "'");
  }
  overrides.insert(overrides.end(), cl.overrides.begin(), cl.overrides.end());
  const std::string path = cl.flags.count("config") ? cl.flags.at("config") : "";
  ResolvedConfig rc = path.empty() ? resolve_config_from_overrides(overrides) : load_config(path, overrides);
  if (!rc.errors.empty()) {
    for (const auto& e : rc.errors) std::cerr << (path.empty() ? "serve" : path) << ": " << e << "\n";
    if (cl.flags.count("model"))
      std::cerr << "hint: --model needs the 'local' inference plugin, which is built only where libtorch is installed\n";
    return 2;
  }
  if (!rc.plugins.count("gateway")) {
    std::cerr << "areal-host serve: gateway.plugin is none: there is nothing to serve\n";
    return 2;
  }
  logging::set_level(rc.host.log_level);
  set_effective_config(rc.effective);
  auto log = logging::get("host");
  try {
    std::string inference_name = "inference", gateway_name = "gateway";
    // Router mode (gateway.workers): the workers serve the model; no backend here.
    const Json& workers = rc.effective["gateway"].contains("workers") ? rc.effective["gateway"]["workers"] : Json();
    const bool router = workers.is_array() && !workers.empty();
    areal_services inf_services = make_services(inference_name);
    auto inference_plugin = router ? nullptr : rc.plugins.at("inference");
    std::unique_ptr<PluginInstance> inference;
    areal_inference_ref ref{};
    areal_services gw_services = make_services(gateway_name);
    if (!router) {
      inference = std::make_unique<PluginInstance>(inference_plugin, rc.section_json("inference"), &inf_services);
      ref = areal_inference_ref{AREAL_OFFSET_OF_END(areal_inference_ref, self), inference_plugin->inference(), inference->self()};
      gw_services.inference = &ref;
    }
    auto gateway_plugin = rc.plugins.at("gateway");
    Json gw = Json::parse(rc.section_json("gateway"));
    resolve_gateway_state_dir(rc, gw, /*durable=*/true, /*fresh_training_run=*/false);  // serve continues its state dir
    PluginInstance gateway(gateway_plugin, gw.dump(), &gw_services);
    StringCollector url;
    throw_if_status(gateway_plugin->gateway()->start(gateway.self(), url.writer()), "gateway start");
    if (router)
      log->info("areal-host {} routing sessions over {} worker gateways (no model here)", AREAL_VERSION, workers.size());
    else
      log->info("areal-host {} serving {} {} (no training)", AREAL_VERSION, inference_plugin->name(), inference_plugin->version());
    logging::get("gateway")->info("gateway listening at {}", url.text);
    int sig = 0;
    sigwait(&stop_signals, &sig);
    log->info("signal {} received: stopping", sig);
    warn_if_status(gateway_plugin->gateway()->stop(gateway.self()), "gateway stop");
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "areal-host serve: " << e.what() << "\n";
    return 2;
  }
}

}  // namespace areal::host
