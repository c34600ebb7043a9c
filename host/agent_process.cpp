#include "agent_process.hpp"

#include <fcntl.h>
#include <signal.h>
#include <linux/close_range.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <deque>
#include <fstream>
#include <thread>
#include <vector>

#include "core/plugin_host/error.hpp"
#include "launcher/shell.hpp"
#include "stop_signals.hpp"

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
  const std::string script = "cd " + launcher::shell_quote(cwd) + " && exec " + command;
  std::string sh = "/bin/sh", flag = "-c";
  char* argv[] = {sh.data(), flag.data(), const_cast<char*>(script.c_str()), nullptr};
  // The watchdog's lifeline: the write end stays in areal-host only (close-on-exec).
  int lifeline[2];
  if (pipe2(lifeline, O_CLOEXEC) != 0) throw Error(AREAL_CODE_UNAVAILABLE, std::string("cannot start the agent: pipe: ") + std::strerror(errno));
  // Between fork and exec only async-signal-safe calls, on what was prepared above.
  pid_ = fork();
  if (pid_ < 0) {
    close(lifeline[0]);
    close(lifeline[1]);
    throw Error(AREAL_CODE_UNAVAILABLE, "cannot start agent command '" + command + "': " + std::strerror(errno));
  }
  if (pid_ == 0) watch_agent(lifeline, argv, envp.data(), log_path.c_str());  // never returns
  close(lifeline[0]);
  lifeline_ = lifeline[1];
}

// The watchdog (pid_): in a process group of its own with the agent, it
// waits for either to end. The agent exits: the watchdog ends the same way,
// so exit_report() tells how the agent ended. areal-host dies (kill -9, a
// crash: the lifeline pipe reads end-of-file): it stops the agent's group
// (SIGTERM, then SIGKILL after 5 s) rather than leave it running against a
// dead gateway; a resumed run starts its own. (PR_SET_PDEATHSIG cannot do
// this: exec may clear it, and it does for root here.)
[[noreturn]] void AgentProcess::watch_agent(const int lifeline[2], char* const argv[], char* const envp[], const char* log_path) {
  restore_child_signals();  // the agent it starts inherits this
  setpgid(0, 0);  // its own group: stop() reaches the agent and everything it starts
  // Keep nothing of areal-host's but the lifeline (as fd 3): a listening
  // socket held here would block a restarted gateway's port.
  if (dup2(lifeline[0], 3) != 3) _exit(127);
  fcntl(3, F_SETFD, FD_CLOEXEC);
  close_range(4, ~0U, 0);
  const int lifeline_fd = 3;
  const pid_t agent = fork();
  if (agent < 0) _exit(127);
  if (agent == 0) {
    const int in = open("/dev/null", O_RDONLY);
    const int out = open(log_path, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (in < 0 || out < 0) _exit(127);
    dup2(in, STDIN_FILENO);
    dup2(out, STDOUT_FILENO);
    dup2(out, STDERR_FILENO);
    execve("/bin/sh", argv, envp);
    _exit(127);
  }
  signal(SIGTERM, SIG_IGN);  // stop()'s SIGTERM is for the agent; the watchdog follows it out
  int status = 0;
  for (;;) {
    if (waitpid(agent, &status, WNOHANG) == agent) break;
    pollfd p{lifeline_fd, POLLIN, 0};
    if (poll(&p, 1, 200) > 0) {  // end-of-file: areal-host is gone
      kill(-getpid(), SIGTERM);
      for (int i = 0; i < 50 && waitpid(agent, &status, WNOHANG) != agent; ++i) usleep(100000);
      kill(-getpid(), SIGKILL);  // the watchdog too: nobody is left to read its status
      _exit(1);
    }
  }
  if (WIFSIGNALED(status)) {
    signal(WTERMSIG(status), SIG_DFL);
    kill(getpid(), WTERMSIG(status));
  }
  _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 1);
}

AgentProcess::~AgentProcess() {
  stop();
  if (lifeline_ >= 0) close(lifeline_);
}

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
