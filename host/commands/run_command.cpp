// `areal-host run --config x.yaml`: start the configured plugins and run the
// job: the RL trainer when a train section is configured, else rollout
// collection only.
#include <filesystem>
#include <fstream>
#include <iostream>
#include <cstdint>
#include <string>
#include <memory>
#include <algorithm>
#include <exception>

#include "../config_loading.hpp"
#include "../launcher/run_launcher.hpp"
#include "../train_ranks/rank_messages.hpp"
#include "../rollout_runner.hpp"
#include "../training_job.hpp"
#include "../gateway_startup.hpp"
#include "core/plugin_host/error.hpp"
#include "core/plugin_host/gateway_sessions.hpp"
#include "core/plugin_host/host_api.hpp"
#include "core/telemetry/logging.hpp"
#include "core/plugin_host/plugin_instance.hpp"
#include "core/plugin_host/string_writer.hpp"
#include "commands.hpp"

namespace areal::host {

namespace {

// Where a launcher (and a person) finds the gateway: <run dir>/gateway_url,
// or launcher.slurm.url_file.
void write_gateway_url(const ResolvedConfig& rc, std::string url) {
  // A gateway on every interface is reached at this machine's name.
  if (const auto at = url.find("://0.0.0.0:"); at != std::string::npos) url.replace(at + 3, 7, ranks::host_name());
  else if (rc.host.launcher.type == "slurm" && url.find("://127.0.0.1:") != std::string::npos)
    logging::get("gateway")->warn("the gateway listens on 127.0.0.1 of {}: only agents on that node reach {} (gateway.host=0.0.0.0 lets "
                                  "agents elsewhere, e.g. on the login node, reach it at http://{}:PORT)", ranks::host_name(), url, ranks::host_name());
  const std::string file = rc.host.launcher.slurm.url_file.empty() ? rc.path(rc.host.run_dir_relative()) + "/gateway_url"
                                                                   : rc.path(rc.host.launcher.slurm.url_file);
  std::filesystem::create_directories(std::filesystem::path(file).parent_path());
  const std::string tmp = file + ".tmp";
  std::ofstream(tmp) << url << "\n";
  std::filesystem::rename(tmp, file);  // whole, or not yet there
  logging::get("gateway")->info("gateway URL written to {}", file);
}

}  // namespace

int run_job(const CommandLine& cl) {
  const std::string path = cl.flags.at("config");
  ResolvedConfig rc = load_config(path, cl.overrides);
  if (report_config_errors(path, rc)) return 2;
  const HostSettings& h = rc.host;
  logging::set_level(h.log_level);
  set_effective_config(rc.effective);
  auto log = logging::get("host");

  // What the job needs, checked before anything starts.
  if (const auto problems = run_job_problems(rc); !problems.empty()) {
    for (const auto& p : problems) std::cerr << path << ": " << p << " (see docs/configuration.md)\n";
    return 2;
  }
  const bool training = rc.plugins.count("train") > 0;
  const bool online = h.online();

  log->info("areal-host {} (plugin ABI {}.{})", AREAL_VERSION, AREAL_ABI_MAJOR, AREAL_ABI_MINOR);
  log->info("config {} | experiment {} / {}", path, h.experiment.name, h.experiment.trial);
  for (const auto& [section, p] : rc.plugins)
    log->info("plugin {:<10} {} {} [{}] ABI {} from {}", section, p->name(), p->version(), kind_name(p->kind()),
              p->abi_version(), p->path());

  RolloutPlan plan;
  try {
    if (!online) plan.dataset = read_dataset(rc.path(h.rollout.dataset));
  } catch (const std::exception& e) {
    std::cerr << path << ": " << e.what() << "\n";
    return 2;
  }
  plan.episodes = h.rollout.episodes ? h.rollout.episodes : plan.dataset.size();
  plan.concurrency = h.rollout.concurrency;
  plan.seed = h.experiment.seed;
  plan.output_path = rc.path(h.rollout.output.empty() ? h.run_dir_relative() + "/rollouts.jsonl" : h.rollout.output);

  // Processes beside this one (launcher.*): inference servers before the
  // inference plugin that connects to them, train ranks in run_training.
  std::unique_ptr<launcher::RunLauncher> launched;
  try {
    const bool multi_rank = training && train_world_size(rc) > 1;
    if (multi_rank || h.launcher.servers.count > 0 || h.launcher.type == "slurm") {
      launched = std::make_unique<launcher::RunLauncher>(rc, rc.path(h.run_dir_relative()));
      launched->start_servers(rc);
    }
    // Start order: inference, gateway, workflow; torn down in reverse.
    std::string inference_name = "inference", workflow_name = "workflow";
    areal_services inf_services = make_services(inference_name);
    auto inference_plugin = rc.plugins.at("inference");
    PluginInstance inference(inference_plugin, rc.section_json("inference"), &inf_services);
    areal_inference_ref ref{AREAL_OFFSET_OF_END(areal_inference_ref, self), inference_plugin->inference(), inference.self()};

    std::unique_ptr<RunningGateway> gateway;
    RunningParts running;
    running.inference = ref;
    if (rc.plugins.count("gateway")) {
      gateway = start_gateway(rc, &ref, GatewayStart{training, online, online && training && !h.trainer.resume});
      running.gateway = gateway->vtable;
      running.gateway_self = gateway->self();
      running.sessions = gateway->sessions.get();
      running.gateway_url = gateway->url;
      write_gateway_url(rc, gateway->url);
      plan.sessions = running.sessions;
      plan.base_url = gateway->url + "/v1";
      logging::get("gateway")->info("gateway listening at {}", gateway->url);
    }

    areal_services wf_services = make_services(workflow_name);
    wf_services.inference = &ref;
    std::unique_ptr<PluginInstance> workflow;
    if (rc.plugins.count("workflow")) {
      Json wf = Json::parse(rc.section_json("workflow"));
      if (const auto& workers = h.rollout.openai.subproc_max_workers) {
        const std::string wf_name = rc.plugins.at("workflow")->name();
        if (wf_name == "subproc") wf["max_workers"] = *workers;
        if (wf_name == "agent_pool") wf["workers"] = *workers;
      }
      workflow = std::make_unique<PluginInstance>(rc.plugins.at("workflow"), wf.dump(), &wf_services);
      running.workflow = rc.plugins.at("workflow")->workflow();
      running.workflow_self = workflow->self();
    }

    running.launcher = launched.get();
    if (training) {
      const int rc_train = run_training(rc, plan, running);
      if (gateway) gateway->stop();
      return rc_train;
    }
    log->info("rollout: {} episodes over {} dataset items, concurrency {}, output {}", plan.episodes, plan.dataset.size(),
              plan.concurrency, plan.output_path);
    RolloutSummary s = run_rollout(plan, *running.workflow, running.workflow_self, *ref.vtable, ref.self);
    log->info("done: {} ok, {} failed | mean reward {:.4f} over {} rewarded completions | {} tokens | {:.2f} s ({:.1f} episodes/s)",
              s.ok, s.failed, s.mean_reward(), s.rewarded, s.tokens, s.seconds, (s.ok + s.failed) / std::max(s.seconds, 1e-9));
    if (gateway) gateway->stop();
    if (s.failed > 0) {
      std::cerr << "areal-host: " << s.failed << " episode(s) failed; their records in " << plan.output_path
                << " have status \"error\" and the reason\n";
      return 1;
    }
    return 0;
  } catch (const std::exception& e) {
    // Stop the launched processes first: a rank that died is reported as
    // such (and becomes fatal()), the others as stopped.
    if (launched) launched->stop_all();
    std::cerr << "areal-host: " << e.what() << "\n";
    // What ended the run when a launched process did (a rank's exit is why its connection closed).
    if (launched && !launched->fatal().empty() && std::string(e.what()).find(launched->fatal()) == std::string::npos)
      std::cerr << "areal-host: the run ended because " << launched->fatal() << "\n";
    return 2;
  }
}

}  // namespace areal::host
