// The processes a launcher starts for a run (train ranks, inference
// servers, srun clients on Slurm): each in its own process group, its
// stdout and stderr streamed line by line to our stderr behind a
// "[name] " prefix and copied to a log file, watched until it ends.
// stop_all() (and the destructor) ends every group: SIGTERM, then SIGKILL
// after a grace period. If areal-host dies without stopping them (kill -9,
// Ctrl-C, a crash), a reaper process (`areal-host reap-process-groups`,
// started with the first child, in a group of its own) sees its lifeline
// pipe close and ends every group still listed, so none is orphaned.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace areal::host::launcher {

struct ProcessSpec {
  std::string name;                        // the log prefix and file name: "rank1", "server0"
  std::vector<std::string> argv;           // argv[0] is looked up on PATH
  std::map<std::string, std::string> env;  // added to (or replacing in) ours
  std::string log_path;                    // empty: no file copy
};

struct ProcessExit {
  std::string name;
  pid_t pid = 0;
  int status = 0;  // as from waitpid
  bool status_known = true;  // false when waitpid failed
  bool requested = false;  // ended by stop_all()/stop() (not: a crash or a foreign kill during the stop)
  std::string describe() const;  // "exited with status 1" / "was killed by signal 9 (SIGKILL)"
  bool success() const;
};

class ProcessSet {
 public:
  // on_exit runs on a watcher thread when a process ends (also when it was
  // stopped on purpose: see ProcessExit::requested).
  explicit ProcessSet(std::function<void(const ProcessExit&)> on_exit = nullptr);
  ~ProcessSet();
  ProcessSet(const ProcessSet&) = delete;
  ProcessSet& operator=(const ProcessSet&) = delete;

  // Starts a process; throws areal::Error when it cannot. Returns its pid.
  pid_t start(const ProcessSpec& spec);
  // Ends one process (by name) and waits for it.
  void stop(const std::string& name, int grace_seconds = 5);
  // Waits up to `seconds` for the processes whose name starts with `prefix`
  // to end by themselves; true when they all did.
  bool wait_exit(const std::string& prefix, int seconds);
  // Ends all processes still running and waits for them.
  void stop_all(int grace_seconds = 5);

  // The first unrequested exit that was not a success; empty when none.
  std::string first_failure() const;
  bool running(const std::string& name) const;
  // Lines a process printed that contain `needle` (for "listening at ..."); empty when none yet.
  std::string find_line(const std::string& name, const std::string& needle) const;

 private:
  struct Child {
    ProcessSpec spec;
    pid_t pid = -1;
    int out_fd = -1;
    bool exited = false, stop_requested = false, sigkill_sent = false;
    std::vector<std::string> recent;  // the last lines, for find_line
    std::thread watcher;
  };
  void watch(Child* c);
  void start_reaper();
  void tell_reaper(char op, pid_t group);

  std::function<void(const ProcessExit&)> on_exit_;
  mutable std::mutex mutex_;
  std::condition_variable exited_cv_;
  std::vector<std::unique_ptr<Child>> children_;
  std::string first_failure_;
  pid_t reaper_ = -1;
  int reaper_pipe_ = -1;  // write end: "+PGID\n" / "-PGID\n"; closing it tells the reaper to act
};

// `areal-host reap-process-groups`: the reaper. Reads "+PGID"/"-PGID" lines
// from fd 3 until end of file, then ends every group still listed
// (SIGTERM, SIGKILL after 5 s). Exit status 0.
int reap_process_groups();

}  // namespace areal::host::launcher
