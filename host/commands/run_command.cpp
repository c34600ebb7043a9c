// `areal-host run --config x.yaml`: start the configured plugins and run the
// job: the RL trainer when a train section is configured, else rollout
// collection only.
#include <iostream>

#include "../config_loading.hpp"
#include "../rollout_runner.hpp"
#include "areal/core/error.hpp"
#include "areal/core/host_api.hpp"
#include "areal/core/logging.hpp"
#include "areal/core/plugin_instance.hpp"
#include "areal/core/string_writer.hpp"
#include "areal/core/trainer/trainer_loop.hpp"
#include "commands.hpp"

namespace areal::host {

namespace {

// The trainer: train and algorithm instances next to the running inference
// backend, gateway and workflow.
int run_training(const ResolvedConfig& rc, const RolloutPlan& plan, const areal_inference_ref& inference,
                 const areal_workflow_vtable& workflow, void* workflow_self) {
  const Json& cfg = rc.effective;
  const auto& ex = cfg["experiment"];
  const auto& ro = cfg["rollout"];
  const auto& tr = cfg["trainer"];
  std::string train_name = "train", algorithm_name = "algorithm";
  areal_services train_services = make_services(train_name);
  PluginInstance train(rc.plugins.at("train"), rc.section_json("train"), &train_services);
  areal_services algo_services = make_services(algorithm_name);
  PluginInstance algorithm(rc.plugins.at("algorithm"), rc.section_json("algorithm"), &algo_services);

  trainer::TrainerOptions opt;
  opt.total_steps = tr["total_steps"].get<int64_t>();
  opt.temperature = tr["temperature"].get<float>();
  opt.recompute_logprob = tr["recompute_logprob"].get<bool>();
  opt.checkpoint_every = tr["checkpoint_every"].get<int64_t>();
  opt.resume = tr["resume"].get<bool>();
  opt.save_final = tr["save_final"].get<bool>();
  opt.run_dir = rc.path(ex["output_dir"].get<std::string>() + "/" + ex["name"].get<std::string>() + "/" + ex["trial"].get<std::string>());

  trainer::RolloutOptions ro_opt;
  ro_opt.dataset = plan.dataset;
  ro_opt.n_samples = ro["n_samples"].get<size_t>();
  ro_opt.batch_size = tr["batch_size"].get<size_t>();
  ro_opt.max_head_offpolicyness = ro["max_head_offpolicyness"].get<int64_t>();
  ro_opt.max_concurrent = ro["max_concurrent_rollouts"].get<size_t>();
  ro_opt.seed = plan.seed;
  ro_opt.filter = ro["dynamic_filter"].get<std::string>() == "mixed_rewards" ? trainer::DynamicFilter::kMixedRewards
                                                                              : trainer::DynamicFilter::kNone;
  ro_opt.turn_discount = ro["openai"]["turn_discount"].get<double>();
  ro_opt.records_path = plan.output_path;

  trainer::TrainerParts parts;
  parts.train = rc.plugins.at("train")->train(), parts.train_self = train.self();
  parts.algorithm = rc.plugins.at("algorithm")->algorithm(), parts.algorithm_self = algorithm.self();
  parts.inference = inference.vtable, parts.inference_self = inference.self;
  trainer::EpisodeTarget target{&workflow, workflow_self, inference.vtable, inference.self, plan.base_url};

  auto log = logging::get("trainer");
  log->info("training: {} steps x {} groups x {} samples | max_head_offpolicyness {} | records {} | run dir {}",
            opt.total_steps, ro_opt.batch_size, ro_opt.n_samples, ro_opt.max_head_offpolicyness, plan.output_path, opt.run_dir);
  const trainer::TrainSummary s = trainer::run_trainer(opt, parts, std::move(ro_opt), target);
  log->info("done: {} steps in {:.1f} s | mean reward {:.4f} (first step) -> {:.4f} (last step) | version {} | metrics {}/metrics.jsonl",
            s.steps_run, s.seconds, s.first_reward, s.last_reward, s.final_version, opt.run_dir);
  return 0;
}

}  // namespace

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
  if (rc.plugins.count("train") && !rc.plugins.count("algorithm")) {
    std::cerr << path << ": training needs 'algorithm.plugin' (grpo, dr_grpo, rloo, ppo or sft; see docs/algorithms.md)\n";
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

    if (rc.plugins.count("train")) {
      const int rc_train = run_training(rc, plan, ref, *rc.plugins.at("workflow")->workflow(), workflow.self());
      if (gateway) rc.plugins.at("gateway")->gateway()->stop(gateway->self());
      return rc_train;
    }
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
