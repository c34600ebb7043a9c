#include "training_job.hpp"

#include <algorithm>
#include <filesystem>
#include <memory>

#include "agent_process.hpp"
#include "core/plugin_host/error.hpp"
#include "core/telemetry/logging.hpp"
#include "core/plugin_host/plugin_instance.hpp"
#include "core/trainer/trainer_loop.hpp"

namespace areal::host {

int run_training(const ResolvedConfig& rc, const RolloutPlan& plan, const RunningParts& running) {
  const Json& cfg = rc.effective;
  const auto& ex = cfg["experiment"];
  const auto& ro = cfg["rollout"];
  const auto& tr = cfg["trainer"];
  const bool online = ro["openai"]["mode"].get<std::string>() == "online";
  std::string train_name = "train", algorithm_name = "algorithm";
  areal_services train_services = make_services(train_name);
  PluginInstance train(rc.plugins.at("train"), rc.section_json("train"), &train_services);
  areal_services algo_services = make_services(algorithm_name);
  PluginInstance algorithm(rc.plugins.at("algorithm"), rc.section_json("algorithm"), &algo_services);

  std::string ref_name = "ref";
  areal_services ref_services = make_services(ref_name);
  std::unique_ptr<PluginInstance> ref;
  if (rc.plugins.count("ref")) ref = std::make_unique<PluginInstance>(rc.plugins.at("ref"), rc.section_json("ref"), &ref_services);

  trainer::TrainerOptions opt;
  opt.total_steps = tr["total_steps"].get<int64_t>();
  opt.temperature = tr["temperature"].get<float>();
  opt.recompute_logprob = tr["recompute_logprob"].get<bool>();
  opt.checkpoint_every = tr["checkpoint_every"].get<int64_t>();
  opt.resume = tr["resume"].get<bool>();
  opt.save_final = tr["save_final"].get<bool>();
  opt.weight_update = tr["weight_update"].get<std::string>();
  // ABI 1.2 made behaviour log-probs those of the sampling distribution; an
  // older inference plugin reports temperature-1 values, exact only at T = 1.
  if (const auto& inf = rc.plugins.at("inference"); inf->info().abi_minor < 2 && !opt.recompute_logprob)
    logging::get("trainer")->warn(
        "inference plugin '{}' was built for ABI {}: its log-probs are temperature-1 values, which match the trainer's only "
        "when sampling at temperature 1; set trainer.recompute_logprob=true (non-decoupled loss) to sample at another temperature",
        inf->name(), inf->abi_version());
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
  ro_opt.records_path = plan.output_path;
  ro_opt.online = online;
  ro_opt.gateway = running.sessions;

  // Online mode's agent: started once the gateway listens, watched while the
  // trainer waits (a dead agent ends the run with its log), stopped at the end.
  std::unique_ptr<AgentProcess> agent;
  const std::string command = ro["openai"]["online_agent_command"].get<std::string>();
  if (online && ro_opt.filter != trainer::DynamicFilter::kNone)
    throw Error(AREAL_CODE_INVALID_ARGUMENT, "rollout.dynamic_filter works on groups of a workflow's episodes; in online mode each session is its own task");
  if (online && !command.empty()) {
    std::filesystem::create_directories(opt.run_dir);
    const Json& oa_key = ro["openai"]["admin_api_key"];
    const std::string admin_key = !oa_key.is_null() ? oa_key.get<std::string>() : cfg["gateway"].value("admin_api_key", std::string("areal-admin-key"));
    agent = std::make_unique<AgentProcess>(command, rc.base_dir,
                                           std::map<std::string, std::string>{{"AREAL_GATEWAY_URL", running.gateway_url},
                                                                              {"AREAL_ADMIN_KEY", admin_key},
                                                                              {"OPENAI_BASE_URL", running.gateway_url + "/v1"},
                                                                              {"ANTHROPIC_BASE_URL", running.gateway_url}},
                                           opt.run_dir + "/agent.log");
    AgentProcess* watched = agent.get();
    ro_opt.watchdog = [watched] { return watched->exit_report(); };
    logging::get("trainer")->info("online agent started: {} (log {}/agent.log)", command, opt.run_dir);
  }

  trainer::TrainerParts parts;
  parts.train = rc.plugins.at("train")->train(), parts.train_self = train.self();
  parts.algorithm = rc.plugins.at("algorithm")->algorithm(), parts.algorithm_self = algorithm.self();
  parts.inference = running.inference.vtable, parts.inference_self = running.inference.self;
  if (ref) parts.ref = rc.plugins.at("ref")->train(), parts.ref_self = ref->self();
  trainer::EpisodeTarget target{running.workflow, running.workflow_self, running.inference.vtable, running.inference.self,
                                plan.base_url};
  target.gateway = running.sessions;
  target.turn_discount = ro["openai"]["turn_discount"].get<double>();

  auto log = logging::get("trainer");
  log->info("training ({} mode): {} steps x {} groups x {} samples | max_head_offpolicyness {} | records {} | run dir {}",
            online ? "online" : "inline", opt.total_steps, ro_opt.batch_size, ro_opt.n_samples, ro_opt.max_head_offpolicyness,
            plan.output_path, opt.run_dir);
  const trainer::TrainSummary s = trainer::run_trainer(opt, parts, std::move(ro_opt), target);
  if (agent) agent->stop();
  const size_t window = std::min<size_t>(50, std::max<size_t>(1, s.step_rewards.size() / 2));  // the first and last halves of a short run
  log->info("done: {} steps in {:.1f} s | mean reward {:.4f} (first {} steps) -> {:.4f} (last {} steps) | version {} | metrics {}/metrics.jsonl",
            s.steps_run, s.seconds, s.first_mean(window), window, s.last_mean(window), window, s.final_version, opt.run_dir);
  return 0;
}

}  // namespace areal::host
