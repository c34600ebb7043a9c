#include "process_set.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>

#include "core/plugin_host/error.hpp"

extern char** environ;

namespace areal::host::launcher {

std::string ProcessExit::describe() const {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    const char* name = sigabbrev_np(sig);
    return "was killed by signal " + std::to_string(sig) + (name ? std::string(" (SIG") + name + ")" : "");
  }
  return "ended (status " + std::to_string(status) + ")";
}

bool ProcessExit::success() const { return WIFEXITED(status) && WEXITSTATUS(status) == 0; }

ProcessSet::ProcessSet(std::function<void(const ProcessExit&)> on_exit) : on_exit_(std::move(on_exit)) {}

ProcessSet::~ProcessSet() { stop_all(); }

pid_t ProcessSet::start(const ProcessSpec& spec) {
  if (spec.argv.empty()) throw Error(AREAL_CODE_INVALID_ARGUMENT, "process '" + spec.name + "' has no command");
  std::vector<std::string> vars;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string v(*e);
    if (!spec.env.count(v.substr(0, v.find('=')))) vars.push_back(v);
  }
  for (const auto& [k, v] : spec.env) vars.push_back(k + "=" + v);
  std::vector<char*> envp, argv;
  for (auto& v : vars) envp.push_back(v.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = spec.argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) throw Error(AREAL_CODE_UNAVAILABLE, std::string("cannot start ") + spec.name + ": pipe: " + std::strerror(errno));
  const pid_t parent = getpid();
  // Between fork and exec only async-signal-safe calls, on what was prepared above.
  const pid_t pid = fork();
  if (pid < 0) {
    close(out[0]);
    close(out[1]);
    throw Error(AREAL_CODE_UNAVAILABLE, "cannot start " + spec.name + ": fork: " + std::strerror(errno));
  }
  if (pid == 0) {
    setpgid(0, 0);                         // its own group: stopping it reaches whatever it starts
    prctl(PR_SET_PDEATHSIG, SIGTERM);      // areal-host died without stopping it
    if (getppid() != parent) _exit(127);   // ... before the line above took effect
    dup2(out[1], 1);
    dup2(out[1], 2);
    int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, 0);
    execvpe(argv[0], argv.data(), envp.data());
    const char msg[] = "cannot execute the command: ";
    (void)!write(2, msg, sizeof msg - 1);
    (void)!write(2, strerror(errno), strlen(strerror(errno)));
    (void)!write(2, "\n", 1);
    _exit(127);
  }
  setpgid(pid, pid);  // also here, so a stop right away finds the group
  close(out[1]);
  auto child = std::make_unique<Child>();
  child->spec = spec;
  child->pid = pid;
  child->out_fd = out[0];
  Child* c = child.get();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    children_.push_back(std::move(child));
  }
  c->watcher = std::thread([this, c] { watch(c); });
  return pid;
}

// Streams the output behind its prefix until the process ends, then ends
// whatever it left running in its group and reports the exit.
void ProcessSet::watch(Child* c) {
  std::ofstream log;
  if (!c->spec.log_path.empty()) log.open(c->spec.log_path, std::ios::app);
  const std::string prefix = "[" + c->spec.name + "] ";
  std::string pending;
  auto emit = [&](const std::string& line) {
    // One write(2) per line, so it never interleaves with our own log lines.
    const std::string whole = prefix + line + "\n";
    for (size_t done = 0; done < whole.size();) {
      const ssize_t n = ::write(2, whole.data() + done, whole.size() - done);
      if (n <= 0 && errno != EINTR) break;
      if (n > 0) done += static_cast<size_t>(n);
    }
    if (log) log << line << "\n" << std::flush;
    std::lock_guard<std::mutex> lock(mutex_);
    c->recent.push_back(line);
    if (c->recent.size() > 200) c->recent.erase(c->recent.begin());
  };
  auto drain = [&](bool until_eof) {
    char buf[8192];
    while (true) {
      pollfd p{c->out_fd, POLLIN, 0};
      if (poll(&p, 1, until_eof ? 200 : 0) <= 0) return false;
      const ssize_t n = read(c->out_fd, buf, sizeof buf);
      if (n <= 0) return true;  // end of file: every writer is gone
      pending.append(buf, static_cast<size_t>(n));
      for (size_t nl; (nl = pending.find('\n')) != std::string::npos;) {
        emit(pending.substr(0, nl));
        pending.erase(0, nl + 1);
      }
      if (until_eof) return false;
    }
  };
  int status = 0;
  while (true) {
    const bool eof = drain(true);
    const pid_t w = waitpid(c->pid, &status, eof ? 0 : WNOHANG);
    if (w == c->pid) break;
    if (w < 0 && errno != EINTR) break;
  }
  kill(-c->pid, SIGKILL);  // what it started and left behind (its group)
  drain(false);
  if (!pending.empty()) emit(pending);
  close(c->out_fd);
  ProcessExit e;
  e.name = c->spec.name;
  e.pid = c->pid;
  e.status = status;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    c->exited = true;
    e.requested = c->stop_requested;
    if (!e.requested && !e.success() && first_failure_.empty()) first_failure_ = e.name + " (pid " + std::to_string(e.pid) + ") " + e.describe();
  }
  exited_cv_.notify_all();
  if (on_exit_) on_exit_(e);
}

void ProcessSet::stop(const std::string& name, int grace_seconds) {
  std::unique_lock<std::mutex> lock(mutex_);
  for (auto& c : children_) {
    if (c->spec.name != name || c->exited) continue;
    c->stop_requested = true;
    kill(-c->pid, SIGTERM);
    if (!exited_cv_.wait_for(lock, std::chrono::seconds(grace_seconds), [&] { return c->exited; })) kill(-c->pid, SIGKILL);
    exited_cv_.wait(lock, [&] { return c->exited; });
  }
}

bool ProcessSet::wait_exit(const std::string& prefix, int seconds) {
  std::unique_lock<std::mutex> lock(mutex_);
  return exited_cv_.wait_for(lock, std::chrono::seconds(seconds), [&] {
    for (auto& c : children_)
      if (c->spec.name.rfind(prefix, 0) == 0 && !c->exited) return false;
    return true;
  });
}

void ProcessSet::stop_all(int grace_seconds) {
  std::vector<std::unique_ptr<Child>> children;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    for (auto& c : children_)
      if (!c->exited) c->stop_requested = true, kill(-c->pid, SIGTERM);
    auto all_exited = [&] {
      for (auto& c : children_)
        if (!c->exited) return false;
      return true;
    };
    if (!exited_cv_.wait_for(lock, std::chrono::seconds(grace_seconds), all_exited))
      for (auto& c : children_)
        if (!c->exited) kill(-c->pid, SIGKILL);
    exited_cv_.wait(lock, all_exited);
    children = std::move(children_);
    children_.clear();
  }
  for (auto& c : children)
    if (c->watcher.joinable()) c->watcher.join();
}

std::string ProcessSet::first_failure() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return first_failure_;
}

bool ProcessSet::running(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& c : children_)
    if (c->spec.name == name && !c->exited) return true;
  return false;
}

std::string ProcessSet::find_line(const std::string& name, const std::string& needle) const {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& c : children_)
    if (c->spec.name == name)
      for (const auto& line : c->recent)
        if (line.find(needle) != std::string::npos) return line;
  return "";
}

}  // namespace areal::host::launcher
