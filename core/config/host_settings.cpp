#include "core/config/host_settings.hpp"

namespace areal {

namespace {

template <class T>
std::optional<T> optional_of(const nlohmann::json& section, const char* key) {
  if (!section.contains(key) || section[key].is_null()) return std::nullopt;
  return section[key].get<T>();
}

}  // namespace

HostSettings HostSettings::read(const nlohmann::json& c) {
  HostSettings s;
  const auto& ex = c.at("experiment");
  s.experiment = {ex.at("name").get<std::string>(), ex.at("trial").get<std::string>(), ex.at("output_dir").get<std::string>(),
                  ex.at("seed").get<uint64_t>()};
  s.log_level = c.at("log").at("level").get<std::string>();
  const auto& ro = c.at("rollout");
  s.rollout.dataset = ro.at("dataset").get<std::string>();
  s.rollout.output = ro.at("output").get<std::string>();
  s.rollout.episodes = ro.at("episodes").get<size_t>();
  s.rollout.concurrency = ro.at("concurrency").get<size_t>();
  s.rollout.n_samples = ro.at("n_samples").get<size_t>();
  s.rollout.max_concurrent_rollouts = ro.at("max_concurrent_rollouts").get<size_t>();
  s.rollout.max_head_offpolicyness = ro.at("max_head_offpolicyness").get<int64_t>();
  s.rollout.dynamic_filter = ro.at("dynamic_filter").get<std::string>();
  s.rollout.max_failed_groups_in_a_row = ro.at("max_failed_groups_in_a_row").get<int64_t>();
  s.rollout.record_routing = ro.at("record_routing").get<bool>();
  const auto& oa = ro.at("openai");
  s.rollout.openai.mode = oa.at("mode").get<std::string>();
  s.rollout.openai.online_agent_command = oa.at("online_agent_command").get<std::string>();
  s.rollout.openai.turn_discount = oa.at("turn_discount").get<double>();
  s.rollout.openai.export_style = optional_of<std::string>(oa, "export_style");
  s.rollout.openai.admin_api_key = optional_of<std::string>(oa, "admin_api_key");
  s.rollout.openai.session_timeout_seconds = optional_of<double>(oa, "session_timeout_seconds");
  s.rollout.openai.subproc_max_workers = optional_of<int64_t>(oa, "subproc_max_workers");
  const auto& tr = c.at("trainer");
  s.trainer.total_steps = tr.at("total_steps").get<int64_t>();
  s.trainer.checkpoint_every = tr.at("checkpoint_every").get<int64_t>();
  s.trainer.batch_size = tr.at("batch_size").get<size_t>();
  s.trainer.temperature = tr.at("temperature").get<float>();
  s.trainer.recompute_logprob = tr.at("recompute_logprob").get<bool>();
  s.trainer.ppo_n_minibatches = tr.at("ppo_n_minibatches").get<int64_t>();
  s.trainer.resume = tr.at("resume").get<bool>();
  s.trainer.save_final = tr.at("save_final").get<bool>();
  s.trainer.weight_update = tr.at("weight_update").get<std::string>();
  const auto& ev = c.at("evaluation");
  s.evaluation.agent_command = ev.at("agent_command").get<std::string>();
  s.evaluation.dataset = ev.at("dataset").get<std::string>();
  s.evaluation.every_steps = ev.at("every_steps").get<int64_t>();
  s.evaluation.n_samples = ev.at("n_samples").get<int64_t>();
  s.evaluation.at_end = ev.at("at_end").get<bool>();
  s.evaluation.greedy = ev.at("greedy").get<bool>();
  s.evaluation.temperature = ev.at("temperature").get<double>();
  s.evaluation.timeout_seconds = ev.at("timeout_seconds").get<double>();
  const auto& la = c.at("launcher");
  s.launcher.type = la.at("type").get<std::string>();
  s.launcher.rank_start_timeout_seconds = la.at("rank_start_timeout_seconds").get<int>();
  const auto& sv = la.at("servers");
  s.launcher.servers.count = sv.at("count").get<int>();
  s.launcher.servers.command = sv.at("command").get<std::string>();
  s.launcher.servers.model_path = sv.at("model_path").get<std::string>();
  s.launcher.servers.port = sv.at("port").get<int>();
  s.launcher.servers.start_timeout_seconds = sv.at("start_timeout_seconds").get<int>();
  s.launcher.servers.engine = sv.at("engine");
  const auto& sl = la.at("slurm");
  auto& S = s.launcher.slurm;
  S.nodes = sl.at("nodes").get<int>();
  S.train_nodes = sl.at("train_nodes").get<int>();
  S.ntasks_per_node = sl.at("ntasks_per_node").get<int>();
  S.gpus_per_task = sl.at("gpus_per_task").get<int>();
  S.gpus_per_server = sl.at("gpus_per_server").get<int>();
  S.cpus_per_task = sl.at("cpus_per_task").get<int>();
  S.partition = sl.at("partition").get<std::string>();
  S.time = sl.at("time").get<std::string>();
  S.account = sl.at("account").get<std::string>();
  S.job_name = sl.at("job_name").get<std::string>();
  S.url_file = sl.at("url_file").get<std::string>();
  S.extra_sbatch = sl.at("extra_sbatch").get<std::vector<std::string>>();
  S.srun_args = sl.at("srun_args").get<std::vector<std::string>>();
  S.poll_seconds = sl.at("poll_seconds").get<double>();
  const auto& db = c.at("dashboard");
  s.dashboard.enabled = db.at("enabled").get<bool>();
  s.dashboard.host = db.at("host").get<std::string>();
  s.dashboard.port = db.at("port").get<int>();
  const auto& sft = c.at("sft");
  s.sft.dataset = sft.at("dataset").get<std::string>();
  s.sft.tokenizer = sft.at("tokenizer").get<std::string>();
  s.sft.chat_template_kwargs = sft.at("chat_template_kwargs");
  s.sft.max_length = sft.at("max_length").get<int64_t>();
  return s;
}

}  // namespace areal
