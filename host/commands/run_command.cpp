// `areal-host --config x.yaml`: start the configured plugins and run the job.
// Today the job is rollout collection (issue #6 adds training on top).
#include <iostream>

#include "../config_loading.hpp"
#include "../rollout_runner.hpp"
#include "areal/core/error.hpp"
#include "areal/core/host_api.hpp"
#include "areal/core/logging.hpp"
#include "areal/core/plugin_instance.hpp"
#include "areal/core/string_writer.hpp"
#include "commands.hpp"

namespace areal::host {

int run_job(const CommandLine& cl) {
  const std::string path = cl.flags.at("config");
  ResolvedConfig rc = load_config(path, cl.overrides);
  if (!rc.errors.empty()) {
    for (const auto& e : rc.errors) std::cerr << path << ": " << e << "\n";
    std::cerr << "areal-host: the config has " << rc.errors.size() << " problem(s); nothing was started\n";
    return 2;
  }
  const Json& cfg = rc.effective;
  logging::set_level(cfg["log"]["level"].get<std::string>());
  set_effective_config(cfg);
  auto log = logging::get("host");

  if (!rc.plugins.count("workflow")) {
    std::cerr << path << ": 'workflow.plugin' is required to run (see docs/configuration.md)\n";
    return 2;
  }
  if (cfg["rollout"]["dataset"].get<std::string>().empty()) {
    std::cerr << path << ": 'rollout.dataset' is required to run (a JSONL file of episode data)\n";
    return 2;
  }

  log->info("areal-host {} (plugin ABI {}.{})", AREAL_VERSION, AREAL_ABI_MAJOR, AREAL_ABI_MINOR);
  log->info("config {} | experiment {} / {}", path, cfg["experiment"]["name"].get<std::string>(),
            cfg["experiment"]["trial"].get<std::string>());
  for (const auto& [section, p] : rc.plugins)
    log->info("plugin {:<10} {} {} [{}] ABI {} from {}", section, p->name(), p->version(), kind_name(p->kind()),
              p->abi_version(), p->path());

  RolloutPlan plan;
  try {
    plan.dataset = read_dataset(rc.path(cfg["rollout"]["dataset"].get<std::string>()));
  } catch (const std::exception& e) {
    std::cerr << path << ": " << e.what() << "\n";
    return 2;
  }
  const auto& ro = cfg["rollout"];
  plan.episodes = ro["episodes"].get<size_t>() ? ro["episodes"].get<size_t>() : plan.dataset.size();
  plan.concurrency = ro["concurrency"].get<size_t>();
  plan.seed = cfg["experiment"]["seed"].get<uint64_t>();
  const auto& ex = cfg["experiment"];
  plan.output_path = ro["output"].get<std::string>().empty()
                         ? rc.path(ex["output_dir"].get<std::string>() + "/" + ex["name"].get<std::string>() + "/" +
                                   ex["trial"].get<std::string>() + "/rollouts.jsonl")
                         : rc.path(ro["output"].get<std::string>());

  try {
    // Start order: inference, gateway, workflow; torn down in reverse.
    std::string inference_name = "inference", gateway_name = "gateway", workflow_name = "workflow";
    areal_services inf_services = make_services(inference_name);
    auto inference_plugin = rc.plugins.at("inference");
    PluginInstance inference(inference_plugin, rc.section_json("inference"), &inf_services);
    areal_inference_ref ref{AREAL_OFFSET_OF_END(areal_inference_ref, self), inference_plugin->inference(), inference.self()};

    std::unique_ptr<PluginInstance> gateway;
    areal_services gw_services = make_services(gateway_name);
    gw_services.inference = &ref;
    if (rc.plugins.count("gateway")) {
      gateway = std::make_unique<PluginInstance>(rc.plugins.at("gateway"), rc.section_json("gateway"), &gw_services);
      StringCollector url;
      throw_if_status(rc.plugins.at("gateway")->gateway()->start(gateway->self(), url.writer()), "gateway start");
      plan.base_url = url.text + "/v1";
      logging::get("gateway")->info("gateway listening at {}", url.text);
    }

    areal_services wf_services = make_services(workflow_name);
    wf_services.inference = &ref;
    PluginInstance workflow(rc.plugins.at("workflow"), rc.section_json("workflow"), &wf_services);

    log->info("rollout: {} episodes over {} dataset items, concurrency {}, output {}", plan.episodes, plan.dataset.size(),
              plan.concurrency, plan.output_path);
    RolloutSummary s = run_rollout(plan, *rc.plugins.at("workflow")->workflow(), workflow.self(), *ref.vtable, ref.self);
    log->info("done: {} ok, {} failed | mean reward {:.4f} over {} rewarded completions | {} tokens | {:.2f} s ({:.1f} episodes/s)",
              s.ok, s.failed, s.mean_reward(), s.rewarded, s.tokens, s.seconds, (s.ok + s.failed) / std::max(s.seconds, 1e-9));
    if (gateway) rc.plugins.at("gateway")->gateway()->stop(gateway->self());
    if (s.failed > 0) {
      std::cerr << "areal-host: " << s.failed << " episode(s) failed; their records in " << plan.output_path
                << " have status \"error\" and the reason\n";
      return 1;
    }
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "areal-host: " << e.what() << "\n";
    return 2;
  }
}

}  // namespace areal::host
