// The processes `areal-host run` starts beside itself, by launcher.type:
//   local  child processes on this machine
//   slurm  srun steps inside the allocation `areal-host launch` submitted
// Inference servers (launcher.servers) start first, and their URLs become
// inference.servers; train ranks (train.world_size > 1) connect back to
// this controller as a RemoteTrainRanks. Every child is watched: a rank
// that ends makes fatal() say so (the run then ends); a server that ends
// leaves the pool, and the run ends when none is left. Destruction stops
// them all.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "../config_loading.hpp"
#include "../train_ranks/remote_train_ranks.hpp"
#include "process_set.hpp"

namespace areal::host::launcher {

class RunLauncher {
 public:
  RunLauncher(const ResolvedConfig& rc, std::string run_dir);
  ~RunLauncher();

  // launcher.servers.count > 0: starts them and sets rc's inference.servers.
  void start_servers(ResolvedConfig& rc);
  // train.world_size > 1: starts the ranks and returns them connected and
  // created; nullptr for one rank (the train plugin runs in this process).
  std::unique_ptr<ranks::RemoteTrainRanks> start_train_ranks(const ResolvedConfig& rc);
  // Non-empty when the run must end: a rank ended, or every server did.
  std::string fatal() const;
  // From now on processes ending is expected (the run is over), not fatal.
  void expect_exits() { stopping_ = true; }
  // Ends every process still running (SIGTERM, then SIGKILL).
  void stop_all();
  // After the ranks were asked to stop: gives them a few seconds to exit on
  // their own before stop_all() ends them.
  void await_ranks();

 private:
  void on_exit(const ProcessExit& e);
  std::vector<std::string> srun_prefix(int nodes, int relative, int tasks, const std::vector<std::string>& extra) const;
  std::vector<std::string> allocation_nodes() const;

  std::string run_dir_, log_dir_, self_exe_, type_;
  HostSettings::Launcher settings_;
  ProcessSet processes_;
  mutable std::mutex mutex_;
  std::string fatal_;
  int servers_expected_ = 0, servers_ended_ = 0;
  std::atomic<bool> stopping_{false};
};

}  // namespace areal::host::launcher
