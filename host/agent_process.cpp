#include "agent_process.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
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

  // The command runs in `cwd` (relative paths in it are the config's).
  const std::string script = "cd '" + cwd + "' && exec " + command;
  std::string sh = "/bin/sh", flag = "-c";
  char* argv[] = {sh.data(), flag.data(), const_cast<char*>(script.c_str()), nullptr};
  const pid_t parent = getpid();
  // fork + exec rather than posix_spawn: the child must ask to die with us.
  // Between the two only async-signal-safe calls, on what was prepared above.
  pid_ = fork();
  if (pid_ < 0) throw Error(AREAL_CODE_UNAVAILABLE, "cannot start agent command '" + command + "': " + std::strerror(errno));
  if (pid_ == 0) {
    setpgid(0, 0);  // its own group: stop() reaches its children too
    // If areal-host dies (kill -9, a crash), the agent gets SIGTERM rather
    // than running on against a dead gateway; a resumed run starts its own.
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(127);  // we died before the line above took effect
    const int in = open("/dev/null", O_RDONLY);
    const int out = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (in < 0 || out < 0) _exit(127);
    dup2(in, STDIN_FILENO);
    dup2(out, STDOUT_FILENO);
    dup2(out, STDERR_FILENO);
    execve("/bin/sh", argv, envp.data());
    _exit(127);
  }
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
