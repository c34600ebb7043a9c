// `areal-host service --config SERVICE.yaml`: the managed service (issue
// #37, docs/service.md). One engine per base model in service.models, shared
// by every job on it; users, keys and jobs in <state_dir>/tenants.sqlite3;
// runs until SIGINT or SIGTERM, and a restart resumes every job.
#include <pthread.h>
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>
#include <exception>

#include "../config_loading.hpp"
#include "../launcher/run_launcher.hpp"
#include "../service/service_front.hpp"
#include "../service/service_settings.hpp"
#include "core/plugin_host/error.hpp"
#include "core/plugin_host/host_api.hpp"
#include "core/plugin_host/plugin_instance.hpp"
#include "core/telemetry/logging.hpp"
#include "../stop_signals.hpp"
#include "commands.hpp"

namespace areal::host {

namespace {

// One base model's engine, made from its job template's inference section.
struct SharedEngine {
  std::unique_ptr<launcher::RunLauncher> servers;  // launcher.servers of the template, when it has them
  std::string name;  // the services' instance name ("inference.<model>")
  areal_services services{};
  std::unique_ptr<PluginInstance> instance;
  areal_inference_ref ref{};
};

}  // namespace

int run_service(const CommandLine& cl) {
  if (!cl.flags.count("config")) {
    std::cerr << "areal-host service: --config SERVICE.yaml is required (docs/service.md)\n";
    return 2;
  }
  const sigset_t stop_signals = block_stop_signals();
  auto log = logging::get("service");
  try {
    const service::ServiceSettings settings = service::load_service_settings(cl.flags.at("config"));
    tenants::TenantStore store(settings.state_dir);
    std::vector<std::unique_ptr<SharedEngine>> engines;
    service::Engines by_model;
    for (const auto& [model, template_path] : settings.models) {
      ResolvedConfig rc = load_config(template_path, {});
      if (report_config_errors(template_path, rc)) return 2;
      if (!rc.plugins.count("inference")) {
        std::cerr << template_path << ": a job template needs an inference section (the base model's shared engine)\n";
        return 2;
      }
      auto e = std::make_unique<SharedEngine>();
      // The template's launcher.servers: the engine's servers start with the
      // service (srun steps under launcher.type slurm) and its plugin connects to them.
      if (rc.host.launcher.servers.count > 0) {
        e->servers = std::make_unique<launcher::RunLauncher>(rc, settings.state_dir + "/engines/" + model);
        e->servers->start_servers(rc);
      }
      e->name = "inference." + model;
      e->services = make_services(e->name);
      const auto& plugin = rc.plugins.at("inference");
      e->instance = std::make_unique<PluginInstance>(plugin, rc.section_json("inference"), &e->services);
      e->ref = areal_inference_ref{AREAL_OFFSET_OF_END(areal_inference_ref, self), plugin->inference(), e->instance->self()};
      log->info("base model {}: {} {} from {}", model, plugin->name(), plugin->version(), template_path);
      by_model[model] = &e->ref;
      engines.push_back(std::move(e));
    }
    log->info("users, keys and jobs in {}", store.path());
    auto front = std::make_unique<service::ServiceFront>(settings, store, by_model);
    const std::string url = front->start();
    {
      const std::string file = settings.state_dir + "/service_url";
      std::ofstream(file + ".tmp") << url << "\n";
      std::filesystem::rename(file + ".tmp", file);
    }
    log->info("areal-host {} service listening at {} (URL in {}/service_url)", AREAL_VERSION, url, settings.state_dir);
    int sig = 0;
    sigwait(&stop_signals, &sig);
    log->info("signal {} received: stopping (running jobs resume at the next start)", sig);
    front.reset();  // jobs first, then the engines they use
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "areal-host service: " << e.what() << "\n";
    return 2;
  }
}

}  // namespace areal::host
