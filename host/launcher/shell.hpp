// What the launchers need of the shell and of this executable: quoting a
// word for /bin/sh, running a short command for its output (sbatch,
// squeue, scontrol), and areal-host's own path (to start ranks, servers and
// the reaper).
#pragma once

#include <string>

namespace areal::host::launcher {

// A word for /bin/sh, single-quoted where needed.
std::string shell_quote(const std::string& word);

struct CommandOutput {
  int status = -1;     // exit status; -1 when it could not run or was killed
  std::string output;  // stdout and stderr
};
// Runs `command` with /bin/sh and waits for it.
CommandOutput run_shell(const std::string& command);

// This process's executable (/proc/self/exe); throws areal::Error.
std::string self_executable();

}  // namespace areal::host::launcher
