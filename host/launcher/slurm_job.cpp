#include "slurm_job.hpp"

#include <filesystem>
#include <algorithm>

#include "core/plugin_host/error.hpp"
#include "shell.hpp"

namespace areal::host::launcher {

SlurmJob make_slurm_job(const ResolvedConfig& rc, const std::string& config_path, const std::vector<std::string>& overrides,
                        const std::string& host_exe, const std::string& run_dir) {
  const auto& L = rc.host.launcher;
  const auto& S = L.slurm;
  if (L.type != "slurm") throw Error(AREAL_CODE_INVALID_ARGUMENT, "launcher.type is '" + L.type + "': `areal-host launch` submits slurm runs; run this one with `areal-host run`");
  if (S.train_nodes > 0 && L.servers.count > 0 && S.train_nodes >= S.nodes)
    throw Error(AREAL_CODE_INVALID_ARGUMENT, "launcher.slurm.train_nodes (" + std::to_string(S.train_nodes) + ") leaves none of the " +
                                                 std::to_string(S.nodes) + " nodes for the " + std::to_string(L.servers.count) + " inference server(s)");
  const int world = rc.plugins.count("train") ? train_world_size(rc) : 0;
  SlurmJob job;
  // A task per node at least: with fewer tasks than --nodes, Slurm shrinks
  // the allocation (with a warning) and the servers land on the train nodes.
  job.tasks = std::max((world > 1 ? world : 0) + L.servers.count, S.nodes);
  job.output_path = run_dir + "/slurm/job-%j.out";
  const std::string name = S.job_name.empty() ? "areal-" + rc.host.experiment.name + "-" + rc.host.experiment.trial : S.job_name;
  std::string s = "#!/bin/bash\n";
  s += "# Written by `areal-host launch` for " + config_path + "; submitted with sbatch.\n";
  auto line = [&](const std::string& option) { s += "#SBATCH " + option + "\n"; };
  line("--job-name=" + shell_quote(name));
  line("--nodes=" + std::to_string(S.nodes));
  if (S.ntasks_per_node > 0) line("--ntasks-per-node=" + std::to_string(S.ntasks_per_node));
  else line("--ntasks=" + std::to_string(std::max(1, job.tasks)));
  if (S.cpus_per_task > 0) line("--cpus-per-task=" + std::to_string(S.cpus_per_task));
  const int gpus = (world > 1 ? world : 1) * S.gpus_per_task + L.servers.count * S.gpus_per_server;
  if (gpus > 0) line("--gpus=" + std::to_string(gpus));
  if (!S.partition.empty()) line("--partition=" + shell_quote(S.partition));
  if (!S.time.empty()) line("--time=" + shell_quote(S.time));
  if (!S.account.empty()) line("--account=" + shell_quote(S.account));
  line("--output=" + shell_quote(job.output_path));
  for (const auto& extra : S.extra_sbatch) line(extra);
  s += "set -euo pipefail\n";
  s += "cd " + shell_quote(rc.base_dir) + "\n";
  // The controller: gateway, rollout, trainer loop; it starts ranks and servers with srun.
  s += "exec " + shell_quote(host_exe) + " run --config " + shell_quote(config_path);
  for (const auto& o : overrides) s += " " + shell_quote(o);
  s += "\n";
  job.script = s;
  return job;
}

std::string parse_sbatch_job_id(const std::string& output, std::string* messages) {
  std::string id, line, others;
  size_t start = 0;
  while (start < output.size()) {
    size_t end = output.find('\n', start);
    if (end == std::string::npos) end = output.size();
    line = output.substr(start, end - start);
    start = end + 1;
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) line.pop_back();
    const std::string number = line.substr(0, line.find(';'));
    if (!number.empty() && number.find_first_not_of("0123456789") == std::string::npos) {
      if (!id.empty()) others += id + "\n";
      id = number;
    } else if (!line.empty()) {
      others += line + "\n";
    }
  }
  if (messages) *messages = others;
  return id;
}

}  // namespace areal::host::launcher
