#include "training_job.hpp"

#include <algorithm>
#include <iostream>
#include <filesystem>
#include <memory>
#include <cstdint>
#include <string>
#include <map>
#include <exception>

#include "agent_process.hpp"
#include "launcher/run_launcher.hpp"
#include "dashboard/dashboard_server.hpp"
#include "evaluation.hpp"
#include "core/plugin_host/error.hpp"
#include "core/telemetry/logging.hpp"
#include "core/plugin_host/plugin_instance.hpp"
#include "core/trainer/trainer_loop.hpp"

namespace areal::host {

int run_training(const ResolvedConfig& rc, const RolloutPlan& plan, const RunningParts& running) {
  const HostSettings& h = rc.host;
  const bool online = h.online();
  std::string train_name = "train", algorithm_name = "algorithm";
  areal_services train_services = make_services(train_name);
  // train.world_size > 1: the ranks are processes of their own (the
  // launcher's); else the train plugin runs here.
  std::unique_ptr<ranks::RemoteTrainRanks> train_ranks;
  std::unique_ptr<PluginInstance> train;
  if (running.launcher != nullptr) train_ranks = running.launcher->start_train_ranks(rc);
  if (!train_ranks) train = std::make_unique<PluginInstance>(rc.plugins.at("train"), rc.section_json("train"), &train_services);
  // However this function ends, the ranks ending after it (their connection
  // closes) is expected, not a failure to report.
  struct ExpectExits {
    launcher::RunLauncher* l;
    ~ExpectExits() {
      if (l) l->expect_exits();
    }
  } expect_exits_at_end{running.launcher};
  areal_services algo_services = make_services(algorithm_name);
  PluginInstance algorithm(rc.plugins.at("algorithm"), rc.section_json("algorithm"), &algo_services);

  std::string ref_name = "ref";
  areal_services ref_services = make_services(ref_name);
  std::unique_ptr<PluginInstance> ref;
  if (rc.plugins.count("ref")) ref = std::make_unique<PluginInstance>(rc.plugins.at("ref"), rc.section_json("ref"), &ref_services);

  trainer::TrainerOptions opt;
  opt.total_steps = h.trainer.total_steps;
  opt.temperature = h.trainer.temperature;
  opt.recompute_logprob = h.trainer.recompute_logprob;
  opt.ppo_n_minibatches = h.trainer.ppo_n_minibatches;
  opt.train_world_size = train_world_size(rc);
  opt.checkpoint_every = h.trainer.checkpoint_every;
  opt.resume = h.trainer.resume;
  opt.save_final = h.trainer.save_final;
  opt.weight_update = h.trainer.weight_update;
  if (!running.shared_engine_adapter.empty()) opt.shared_engine = true, opt.policy_adapter = running.shared_engine_adapter;
  // ABI 1.2 made behaviour log-probs those of the sampling distribution; an
  // older inference plugin reports temperature-1 values, exact only at T = 1.
  if (const auto& inf = rc.plugins.at("inference"); inf->info().abi_minor < 2 && !opt.recompute_logprob)
    logging::get("trainer")->warn(
        "inference plugin '{}' was built for ABI {}: its log-probs are temperature-1 values, which match the trainer's only "
        "when sampling at temperature 1; set trainer.recompute_logprob=true (non-decoupled loss) to sample at another temperature",
        inf->name(), inf->abi_version());
  opt.run_dir = rc.path(h.run_dir_relative());

  trainer::RolloutOptions ro_opt;
  ro_opt.dataset = plan.dataset;
  ro_opt.n_samples = h.rollout.n_samples;
  ro_opt.batch_size = h.trainer.batch_size;
  ro_opt.max_head_offpolicyness = h.rollout.max_head_offpolicyness;
  ro_opt.max_concurrent = h.rollout.max_concurrent_rollouts;
  ro_opt.seed = plan.seed;
  ro_opt.filter = h.rollout.dynamic_filter == "mixed_rewards" ? trainer::DynamicFilter::kMixedRewards : trainer::DynamicFilter::kNone;
  ro_opt.records_path = plan.output_path;
  ro_opt.max_failed_groups_in_a_row = h.rollout.max_failed_groups_in_a_row;
  ro_opt.online = online;
  ro_opt.gateway = running.sessions;

  // Online mode's agent: started once the gateway listens, watched while the
  // trainer waits (a dead agent ends the run with its log), stopped at the end.
  std::unique_ptr<AgentProcess> agent;
  const std::string& command = h.rollout.openai.online_agent_command;
  if (online && !command.empty()) {
    std::filesystem::create_directories(opt.run_dir);
    const std::string admin_key = h.rollout.openai.admin_api_key.value_or(rc.effective["gateway"].value("admin_api_key", std::string("areal-admin-key")));
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

  // Evaluation beside training: the agent in eval mode against the gateway.
  std::unique_ptr<Evaluator> evaluator;
  if (!h.evaluation.agent_command.empty()) {
    EvaluationPlan ep;
    ep.settings = h.evaluation;
    ep.dataset = h.evaluation.dataset.empty() ? "" : rc.path(h.evaluation.dataset);
    ep.cwd = rc.base_dir;
    ep.run_dir = opt.run_dir;
    ep.gateway_url = running.gateway_url;
    ep.admin_key = h.rollout.openai.admin_api_key.value_or(rc.effective["gateway"].value("admin_api_key", std::string("areal-admin-key")));
    evaluator = std::make_unique<Evaluator>(std::move(ep));
    Evaluator* e = evaluator.get();
    opt.after_step = [e](int64_t step, int64_t version, bool last) { return e->after_step(step, version, last); };
  }

  // The dashboard: the run directory's files as a web page, while it trains.
  std::unique_ptr<dashboard::DashboardServer> board;
  if (h.dashboard.enabled && running.dashboard) {
    dashboard::ServerOptions o;
    o.run_dir = opt.run_dir, o.host = h.dashboard.host, o.port = h.dashboard.port, o.live = true;
    const Json& gw = rc.effective.contains("gateway") ? rc.effective["gateway"] : Json::object();
    const std::string tok_dir = gw.value("tokenizer", std::string()).empty() ? rc.effective["train"].value("model_path", std::string())
                                                                             : gw.value("tokenizer", std::string());
    try {
      o.tokenizer = tokenizer::Tokenizer::from_dir(tok_dir);
    } catch (const std::exception& e) {
      logging::get("dashboard")->info("sessions are shown as token ids: no tokenizer in {} ({})", tok_dir, e.what());
    }
    board = std::make_unique<dashboard::DashboardServer>(std::move(o));
    logging::get("dashboard")->info("dashboard at {}/ (afterwards: areal-host dashboard {})", board->start(), opt.run_dir);
  }

  opt.stop_requested = running.stop_requested;
  if (running.stop_requested) {
    auto agent_check = std::move(ro_opt.watchdog);
    ro_opt.watchdog = [stop = running.stop_requested, agent_check] {
      if (std::string why = stop(); !why.empty()) return why;
      return agent_check ? agent_check() : std::string();
    };
  }
  // The launcher's processes are watched while the trainer waits too.
  if (launcher::RunLauncher* l = running.launcher) {
    auto agent_check = std::move(ro_opt.watchdog);
    ro_opt.watchdog = [l, agent_check] {
      if (std::string f = l->fatal(); !f.empty()) return f;
      return agent_check ? agent_check() : std::string();
    };
  }

  trainer::TrainerParts parts;
  if (train_ranks) parts.train = train_ranks->vtable(), parts.train_self = train_ranks->self();
  else parts.train = rc.plugins.at("train")->train(), parts.train_self = train->self();
  parts.algorithm = rc.plugins.at("algorithm")->algorithm(), parts.algorithm_self = algorithm.self();
  parts.inference = running.inference.vtable, parts.inference_self = running.inference.self;
  if (ref) parts.ref = rc.plugins.at("ref")->train(), parts.ref_self = ref->self();
  trainer::EpisodeTarget target{running.workflow, running.workflow_self, running.inference.vtable, running.inference.self,
                                plan.base_url};
  target.gateway = running.sessions;
  target.turn_discount = h.rollout.openai.turn_discount;
  target.record_routing = h.rollout.record_routing;

  auto log = logging::get("trainer");
  log->info("training ({} mode): {} steps x {} groups x {} samples | max_head_offpolicyness {} | records {} | run dir {}",
            online ? "online" : "inline", opt.total_steps, ro_opt.batch_size, ro_opt.n_samples, ro_opt.max_head_offpolicyness,
            plan.output_path, opt.run_dir);
  const trainer::TrainSummary s = trainer::run_trainer(opt, parts, std::move(ro_opt), target);
  if (agent) agent->stop();
  if (running.launcher) running.launcher->expect_exits();
  if (train_ranks) {
    train_ranks->shutdown();  // they exit; stop_all() ends any that do not
    running.launcher->await_ranks();
  }
  if (running.launcher) running.launcher->stop_all();
  if (board) board->set_live(false);
  const size_t window = std::min<size_t>(50, std::max<size_t>(1, s.step_rewards.size() / 2));  // the first and last halves of a short run
  std::string eval_summary;
  bool final_eval_failed = false;
  if (evaluator && h.evaluation.at_end && !s.evaluations.empty()) {
    const auto& last = s.evaluations.back();
    final_eval_failed = last.value("eval_failed", true);
    eval_summary = final_eval_failed ? " | final evaluation FAILED (" + last.value("eval_log", std::string()) + ")"
                                     : fmt::format(" | evaluation {:.4f} ({}, final weights)", last.value("eval_reward_mean", 0.0),
                                                   h.evaluation.greedy ? "greedy" : "sampled");
  }
  log->info("done: {} steps in {:.1f} s | mean reward {:.4f} (first {} steps) -> {:.4f} (last {} steps){} | version {} | metrics {}/metrics.jsonl",
            s.steps_run, s.seconds, s.first_mean(window), window, s.last_mean(window), window, eval_summary, s.final_version, opt.run_dir);
  if (final_eval_failed) {
    std::cerr << "areal-host: training finished, but the final evaluation failed; see " << opt.run_dir << "/eval/\n";
    return 1;
  }
  return 0;
}

}  // namespace areal::host
