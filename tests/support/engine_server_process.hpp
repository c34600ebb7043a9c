// areal-engine-server in a child process for tests of the remote backend
// plugins: started with the given arguments (after the binary), its URL read
// from its first "http://" line; stopped (SIGTERM, or SIGKILL with kill())
// at scope exit.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

namespace areal::testing {

class EngineServerProcess {
 public:
  EngineServerProcess(const std::string& binary, std::vector<std::string> args) {
    int fds[2];
    if (pipe(fds) != 0) throw std::runtime_error("pipe");
    args.insert(args.begin(), binary);
    pid_ = fork();
    if (pid_ == 0) {
      dup2(fds[1], STDOUT_FILENO);
      close(fds[0]);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    close(fds[1]);
    FILE* out = fdopen(fds[0], "r");
    char line[512];
    while (fgets(line, sizeof line, out) != nullptr) {
      const std::string s(line);
      const size_t at = s.find("http://");
      if (at != std::string::npos) {
        url_ = s.substr(at, s.find_first_of(" \n", at) - at);
        break;
      }
    }
    fclose(out);
    if (url_.empty()) {
      stop(SIGKILL);
      throw std::runtime_error("areal-engine-server did not start");
    }
  }
  EngineServerProcess(const EngineServerProcess&) = delete;
  EngineServerProcess& operator=(const EngineServerProcess&) = delete;
  ~EngineServerProcess() { stop(SIGTERM); }

  const std::string& url() const { return url_; }
  std::string port() const { return url_.substr(url_.rfind(':') + 1); }
  // Ends the process at once (a crash, as the server sees it).
  void kill_now() { stop(SIGKILL); }
  // Stops it without ending it: connections are still accepted (the kernel
  // does that) and never answered, as a server hung in a collective.
  void freeze() { ::kill(pid_, SIGSTOP); }

 private:
  void stop(int signal) {
    if (pid_ <= 0) return;
    ::kill(pid_, signal);
    ::kill(pid_, SIGCONT);  // a frozen one must run to take it
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  pid_t pid_ = -1;
  std::string url_;
};

}  // namespace areal::testing
