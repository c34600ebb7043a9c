// The sbatch script `areal-host launch` submits for launcher.type slurm.
// The batch step runs the controller (`areal-host run` with the same config
// and overrides) on the allocation's first node; the controller then starts
// the train ranks and inference servers as srun steps (run_launcher), so
// everything lives and ends with the job.
#pragma once

#include <string>
#include <vector>

#include "core/config/run_config.hpp"

namespace areal::host::launcher {

struct SlurmJob {
  std::string script;       // the whole sbatch file
  std::string output_path;  // the batch step's output, with %j for the job id
  int tasks = 0;            // --ntasks requested: ranks + servers, and at least one per node
};

// `config_path` and `host_exe` absolute; `overrides` as given on our
// command line (forwarded to the controller). Throws areal::Error for a
// launcher section that cannot make a job.
SlurmJob make_slurm_job(const ResolvedConfig& rc, const std::string& config_path, const std::vector<std::string>& overrides,
                        const std::string& host_exe, const std::string& run_dir);

// The job id in what `sbatch --parsable` printed: its last line that is
// digits (optionally ";cluster"), whatever sbatch or a site's submit
// filter wrote before it (warnings, "routed to partition ..."); empty when
// there is none. `messages` (optional) gets the other lines.
std::string parse_sbatch_job_id(const std::string& output, std::string* messages = nullptr);

}  // namespace areal::host::launcher
