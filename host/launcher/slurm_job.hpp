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
  int tasks = 0;            // --ntasks requested (ranks + servers)
};

// `config_path` and `host_exe` absolute; `overrides` as given on our
// command line (forwarded to the controller). Throws areal::Error for a
// launcher section that cannot make a job.
SlurmJob make_slurm_job(const ResolvedConfig& rc, const std::string& config_path, const std::vector<std::string>& overrides,
                        const std::string& host_exe, const std::string& run_dir);

}  // namespace areal::host::launcher
