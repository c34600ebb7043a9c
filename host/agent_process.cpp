#include "agent_process.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <deque>
#include <fstream>
#include <thread>
#include <vector>

#include "core/plugin_host/error.hpp"

extern char** environ;

namespace areal::host {

AgentProcess::AgentProcess(const std::string& command, const std::string& cwd, const std::map<std::string, std::string>& env,
                           const std::string& log_path)
    : command_(command), log_path_(log_path) {
  std::vector<std::string> vars;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string v(*e);
    if (!env.count(v.substr(0, v.find('=')))) vars.push_back(v);
  }
  for (const auto& [k, v] : env) vars.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& v : vars) envp.push_back(v.data());
  envp.push_back(nullptr);

  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&fa, STDOUT_FILENO, STDERR_FILENO);
  // The command runs in `cwd` (relative paths in it are the config's).
  const std::string script = "cd '" + cwd + "' && exec " + command;
  std::string sh = "/bin/sh", flag = "-c";
  char* argv[] = {sh.data(), flag.data(), const_cast<char*>(script.c_str()), nullptr};
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);  // its own group: stop() reaches its children too
  posix_spawnattr_setpgroup(&attr, 0);
  const int rc = posix_spawn(&pid_, "/bin/sh", &fa, &attr, argv, envp.data());
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) throw Error(AREAL_CODE_UNAVAILABLE, "cannot start agent command '" + command + "': " + std::strerror(rc));
}

AgentProcess::~AgentProcess() { stop(); }

std::string AgentProcess::exit_report() {
  if (!exited_) {
    if (waitpid(pid_, &status_, WNOHANG) != pid_) return "";
    exited_ = true;
  }
  std::string how = WIFEXITED(status_) ? "exited with status " + std::to_string(WEXITSTATUS(status_))
                                       : "was killed by signal " + std::to_string(WTERMSIG(status_));
  std::deque<std::string> tail;
  std::ifstream log(log_path_);
  for (std::string line; std::getline(log, line);) {
    tail.push_back(line);
    if (tail.size() > 10) tail.pop_front();
  }
  std::string report = "the agent command '" + command_ + "' " + how + " (log: " + log_path_ + ")";
  for (const auto& l : tail) report += "\n  | " + l;
  return report;
}

void AgentProcess::stop() {
  if (pid_ <= 0 || exited_) return;
  kill(-pid_, SIGTERM);
  for (int i = 0; i < 50; ++i) {
    if (waitpid(pid_, &status_, WNOHANG) == pid_) {
      exited_ = true;
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  kill(-pid_, SIGKILL);
  waitpid(pid_, &status_, 0);
  exited_ = true;
}

}  // namespace areal::host
