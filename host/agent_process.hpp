// A child process the host starts for the run (online mode's agent
// command): /bin/sh -c COMMAND in a directory, with extra environment,
// output appended to a log file. Stopped (SIGTERM, then SIGKILL) on
// destruction, and by a watchdog process when areal-host dies without
// stopping it, so an agent never outlives the run that started it.
#pragma once

#include <map>
#include <string>
#include <sys/types.h>
#include <sys/wait.h>

namespace areal::host {

class AgentProcess {
 public:
  AgentProcess(const std::string& command, const std::string& cwd, const std::map<std::string, std::string>& env,
               const std::string& log_path);
  ~AgentProcess();
  AgentProcess(const AgentProcess&) = delete;
  AgentProcess& operator=(const AgentProcess&) = delete;

  // Empty while running; else how it ended and the log's last lines.
  std::string exit_report();
  // After exit_report() said it ended: true when it exited with status 0.
  bool succeeded() const { return exited_ && WIFEXITED(status_) && WEXITSTATUS(status_) == 0; }
  void stop();

 private:
  [[noreturn]] static void watch_agent(const int lifeline[2], char* const argv[], char* const envp[], const char* log_path);

  pid_t pid_ = -1;      // the watchdog, whose exit mirrors the agent's
  int lifeline_ = -1;   // its pipe's write end: closed when areal-host exits, however it exits
  int status_ = 0;
  bool exited_ = false;
  std::string command_, log_path_;
};

}  // namespace areal::host
