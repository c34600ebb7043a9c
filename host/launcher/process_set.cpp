#include "process_set.hpp"

#include <fcntl.h>
#include <linux/close_range.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <chrono>
#include <cstring>
#include <fstream>
#include <set>
#include <exception>

#include "core/plugin_host/error.hpp"
#include "core/telemetry/guarded_thread.hpp"
#include "shell.hpp"
#include "../stop_signals.hpp"

extern char** environ;

namespace areal::host::launcher {

std::string ProcessExit::describe() const {
  if (!status_known) return "ended (its exit status is unknown)";
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    const char* name = sigabbrev_np(sig);
    return "was killed by signal " + std::to_string(sig) + (name ? std::string(" (SIG") + name + ")" : "");
  }
  return "ended (status " + std::to_string(status) + ")";
}

bool ProcessExit::success() const { return status_known && WIFEXITED(status) && WEXITSTATUS(status) == 0; }

ProcessSet::ProcessSet(std::function<void(const ProcessExit&)> on_exit) : on_exit_(std::move(on_exit)) {}

ProcessSet::~ProcessSet() {
  stop_all();
  if (reaper_pipe_ >= 0) close(reaper_pipe_);  // nothing listed: the reaper just exits
  if (reaper_ > 0) waitpid(reaper_, nullptr, 0);
}

void ProcessSet::start_reaper() {
  std::string self = self_executable();
  std::string command = "reap-process-groups";
  char* argv[] = {self.data(), command.data(), nullptr};
  int ctl[2];
  if (pipe2(ctl, O_CLOEXEC) != 0) throw Error(AREAL_CODE_UNAVAILABLE, std::string("cannot start the process reaper: pipe: ") + std::strerror(errno));
  const pid_t pid = fork();
  if (pid < 0) {
    close(ctl[0]);
    close(ctl[1]);
    throw Error(AREAL_CODE_UNAVAILABLE, std::string("cannot start the process reaper: fork: ") + std::strerror(errno));
  }
  if (pid == 0) {
    setpgid(0, 0);  // out of the terminal's Ctrl-C, which may end areal-host
    if (dup2(ctl[0], 3) != 3) _exit(127);
    fcntl(3, F_SETFD, 0);
    close_range(4, ~0U, 0);
    execv(argv[0], argv);
    _exit(127);
  }
  close(ctl[0]);
  reaper_ = pid;
  reaper_pipe_ = ctl[1];
}

void ProcessSet::tell_reaper(char op, pid_t group) {
  if (reaper_pipe_ < 0) return;
  const std::string line = op + std::to_string(group) + "\n";  // one write, well under PIPE_BUF: atomic
  (void)!::write(reaper_pipe_, line.data(), line.size());
}

pid_t ProcessSet::start(const ProcessSpec& spec) {
  if (spec.argv.empty()) throw Error(AREAL_CODE_INVALID_ARGUMENT, "process '" + spec.name + "' has no command");
  if (reaper_ < 0) start_reaper();
  const std::string exec_failed = "cannot execute '" + spec.argv[0] + "': ";
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
  // Between fork and exec only async-signal-safe calls, on what was prepared above.
  const pid_t pid = fork();
  if (pid < 0) {
    close(out[0]);
    close(out[1]);
    throw Error(AREAL_CODE_UNAVAILABLE, "cannot start " + spec.name + ": fork: " + std::strerror(errno));
  }
  if (pid == 0) {
    restore_child_signals();
    setpgid(0, 0);  // its own group: stopping it reaches whatever it starts
    dup2(out[1], 1);
    dup2(out[1], 2);
    int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, 0);
    close_range(3, ~0U, 0);  // nothing of ours (a listening socket would keep its port bound)
    execvpe(argv[0], argv.data(), envp.data());
    (void)!write(2, exec_failed.data(), exec_failed.size());
    const char* why = errno == ENOENT ? "not found (is it on PATH?)\n" : errno == EACCES ? "permission denied\n" : "exec failed\n";
    (void)!write(2, why, strlen(why));
    _exit(127);
  }
  setpgid(pid, pid);  // also here, so a stop right away finds the group
  close(out[1]);
  tell_reaper('+', pid);
  auto child = std::make_unique<Child>();
  child->spec = spec;
  child->pid = pid;
  child->out_fd = out[0];
  Child* c = child.get();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    children_.push_back(std::move(child));
  }
  try {
    c->watcher = guarded_thread("launcher", [this, c] { watch(c); });
  } catch (const std::exception& e) {  // no watcher: end it now rather than leave it unwatched
    kill(-pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    close(c->out_fd);
    std::lock_guard<std::mutex> lock(mutex_);
    c->exited = true;
    throw Error(AREAL_CODE_UNAVAILABLE, "cannot watch " + spec.name + ": " + e.what());
  }
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
  bool known = true;
  while (true) {
    const bool eof = drain(true);
    const pid_t w = waitpid(c->pid, &status, eof ? 0 : WNOHANG);
    if (w == c->pid) break;
    if (w < 0 && errno != EINTR) {
      known = false;
      break;
    }
  }
  kill(-c->pid, SIGKILL);  // what it started and left behind (its group)
  tell_reaper('-', c->pid);
  drain(false);
  if (!pending.empty()) emit(pending);
  close(c->out_fd);
  ProcessExit e;
  e.name = c->spec.name;
  e.pid = c->pid;
  e.status = status;
  e.status_known = known;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    c->exited = true;
    // Ours: a stop we asked for ended it (SIGTERM, our SIGKILL, or its own
    // exit meanwhile). A crash or a kill we did not send stays its own, even
    // if it raced with our stop.
    e.requested = c->stop_requested;
    if (e.requested && known && WIFSIGNALED(status))
      e.requested = WTERMSIG(status) == SIGTERM || (WTERMSIG(status) == SIGKILL && c->sigkill_sent);
    if (!e.requested && !e.success() && first_failure_.empty()) first_failure_ = e.name + " (pid " + std::to_string(e.pid) + ") " + e.describe();
  }
  exited_cv_.notify_all();
  if (on_exit_) on_exit_(e);
}

namespace {

// Whether a child has already ended (its watcher may not have reaped it
// yet): such an exit is its own, not one we asked for. Peeks, never reaps.
bool already_ended(pid_t pid) {
  siginfo_t info{};
  if (waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0) return info.si_pid == pid;
  return errno == ECHILD;  // the watcher reaped it already (and has not marked it exited yet)
}

}  // namespace

void ProcessSet::stop(const std::string& name, int grace_seconds) {
  std::unique_lock<std::mutex> lock(mutex_);
  for (auto& c : children_) {
    if (c->spec.name != name || c->exited) continue;
    c->stop_requested = !already_ended(c->pid);
    kill(-c->pid, SIGTERM);
    if (!exited_cv_.wait_for(lock, std::chrono::seconds(grace_seconds), [&] { return c->exited; })) {
      c->sigkill_sent = true;
      kill(-c->pid, SIGKILL);
    }
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
      if (!c->exited) c->stop_requested = !already_ended(c->pid), kill(-c->pid, SIGTERM);
    auto all_exited = [&] {
      for (auto& c : children_)
        if (!c->exited) return false;
      return true;
    };
    if (!exited_cv_.wait_for(lock, std::chrono::seconds(grace_seconds), all_exited))
      for (auto& c : children_)
        if (!c->exited) c->sigkill_sent = true, kill(-c->pid, SIGKILL);
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

namespace areal::host::launcher {

int reap_process_groups() {
  signal(SIGINT, SIG_IGN);  // only the lifeline ends it
  std::set<pid_t> groups;
  std::string pending;
  char buf[512];
  while (true) {
    const ssize_t n = read(3, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // areal-host closed the pipe, or died
    pending.append(buf, static_cast<size_t>(n));
    for (size_t nl; (nl = pending.find('\n')) != std::string::npos; pending.erase(0, nl + 1)) {
      const std::string line = pending.substr(0, nl);
      if (line.size() < 2) continue;
      const pid_t g = static_cast<pid_t>(std::atol(line.c_str() + 1));
      if (g <= 1) continue;
      if (line[0] == '+') groups.insert(g);
      else groups.erase(g);
    }
  }
  if (groups.empty()) return 0;
  for (pid_t g : groups) kill(-g, SIGTERM);
  for (int i = 0; i < 50; ++i) {
    bool alive = false;
    for (pid_t g : groups) alive = alive || kill(-g, 0) == 0;
    if (!alive) return 0;
    usleep(100000);
  }
  for (pid_t g : groups) kill(-g, SIGKILL);
  return 0;
}

}  // namespace areal::host::launcher
