// subproc: runs a user command per episode, in any language (AReaL's
// rollout.openai.mode subproc). The command gets its own gateway session:
//
//   OPENAI_BASE_URL / OPENAI_API_KEY        the gateway's /v1 and the episode's key
//   ANTHROPIC_BASE_URL / ANTHROPIC_API_KEY  the same for Anthropic SDKs
//   AREAL_EPISODE_ID, AREAL_EPISODE_DATA    the episode id and its dataset item (JSON;
//                                           also on stdin, and only there past 120 KB)
//
// so any OpenAI/Anthropic client works unchanged, and every call it makes
// is recorded for training. Reward: the last stdout line, if it is a JSON
// object with "reward", else whatever the command sent to /rl/set_reward.
// A non-zero exit or a timeout fails the episode with the stderr tail; the
// calls made before that are still kept by the host.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>
#include <algorithm>

#include <nlohmann/json.hpp>

#include "areal/sdk.hpp"
#include "areal/sdk_json.hpp"
#include "common/agent_session.hpp"

extern char** environ;

namespace {

using nlohmann::json;
namespace sdk = areal::sdk;

constexpr size_t kMaxEnvItemBytes = 120 * 1024;

struct ProcessResult {
  int status = 0;
  bool timed_out = false;
  std::string out, err;
};

// `text` as one /bin/sh word, whatever it holds.
std::string shell_word(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// /bin/sh -c command with extra environment, stdin fed, stdout/stderr read
// until exit or the deadline (then the process group is killed).
ProcessResult run_command(const std::string& command, const std::string& cwd, const std::vector<std::string>& extra_env,
                          const std::string& stdin_text, double timeout_s) {
  int in_pipe[2], out_pipe[2], err_pipe[2];
  // O_CLOEXEC: a command started concurrently by another episode must not
  // inherit these ends (it would hold this command's stdin open forever).
  if (pipe2(in_pipe, O_CLOEXEC) || pipe2(out_pipe, O_CLOEXEC) || pipe2(err_pipe, O_CLOEXEC))
    throw sdk::Error(AREAL_CODE_UNAVAILABLE, std::string("pipe: ") + std::strerror(errno));
  std::vector<std::string> vars;
  for (char** e = environ; *e != nullptr; ++e) vars.emplace_back(*e);
  vars.insert(vars.end(), extra_env.begin(), extra_env.end());
  std::vector<char*> envp;
  for (auto& v : vars) envp.push_back(v.data());
  envp.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in_pipe[0], STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&fa, out_pipe[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&fa, err_pipe[1], STDERR_FILENO);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // A fresh process's signals: this process ignores SIGPIPE, and a host's
  // blocked stop signals would survive exec too.
  sigset_t none, pipe_only;
  sigemptyset(&none);
  sigemptyset(&pipe_only);
  sigaddset(&pipe_only, SIGPIPE);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &pipe_only);
  const std::string script = cwd.empty() ? command : "cd " + shell_word(cwd) + " && " + command;
  std::string sh = "/bin/sh", flag = "-c";
  char* argv[] = {sh.data(), flag.data(), const_cast<char*>(script.c_str()), nullptr};
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, "/bin/sh", &fa, &attr, argv, envp.data());
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  close(in_pipe[0]), close(out_pipe[1]), close(err_pipe[1]);
  if (rc != 0) {
    close(in_pipe[1]), close(out_pipe[0]), close(err_pipe[0]);
    throw sdk::Error(AREAL_CODE_UNAVAILABLE, "cannot start '" + command + "': " + std::strerror(rc));
  }
  // One loop feeds stdin (without blocking: a command that never reads it
  // must not stall the timeout), reads stdout and stderr (a full pipe would
  // stall the command), and watches the command. Once it has exited, what it
  // left behind in its group is ended (a `server &` would hold the pipes
  // open until the deadline, or leak).
  signal(SIGPIPE, SIG_IGN);
  fcntl(in_pipe[1], F_SETFL, fcntl(in_pipe[1], F_GETFL) | O_NONBLOCK);
  int in_fd = in_pipe[1];
  size_t written = 0;
  if (stdin_text.empty()) close(in_fd), in_fd = -1;
  ProcessResult r;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  pollfd fds[3] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}, {in_fd, POLLOUT, 0}};
  bool exited = false;
  std::chrono::steady_clock::time_point exited_at;
  char buf[4096];
  while (fds[0].fd >= 0 || fds[1].fd >= 0) {
    // A process that left the group (setsid) may still hold the pipes: what
    // the command printed has arrived a second after it exited.
    if (exited && std::chrono::steady_clock::now() - exited_at > std::chrono::seconds(1)) break;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) {
      r.timed_out = true;
      kill(-pid, SIGKILL);
      break;
    }
    if (!exited && waitpid(pid, &r.status, WNOHANG) == pid) {
      exited = true, exited_at = std::chrono::steady_clock::now();
      kill(-pid, SIGKILL);  // its leftovers; the pipes then close
    }
    fds[2].fd = in_fd;
    if (poll(fds, 3, static_cast<int>(std::min<long long>(left, exited ? 50 : 200))) < 0 && errno != EINTR) break;
    if (in_fd >= 0 && (fds[2].revents & (POLLOUT | POLLERR | POLLHUP))) {
      const ssize_t n = write(in_fd, stdin_text.data() + written, stdin_text.size() - written);
      if (n > 0) written += static_cast<size_t>(n);
      if ((n < 0 && errno != EAGAIN && errno != EINTR) || written == stdin_text.size()) close(in_fd), in_fd = -1;  // done, or not read: fine
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      const ssize_t n = read(fds[i].fd, buf, sizeof buf);
      if (n <= 0) {
        close(fds[i].fd);
        fds[i].fd = -1;
        continue;
      }
      std::string& dst = i == 0 ? r.out : r.err;
      dst.append(buf, static_cast<size_t>(n));
      if (dst.size() > (1u << 20)) dst.erase(0, dst.size() - (1u << 20));  // keep the last MiB
    }
  }
  if (in_fd >= 0) close(in_fd);
  for (int i = 0; i < 2; ++i)
    if (fds[i].fd >= 0) close(fds[i].fd);
  if (!exited) waitpid(pid, &r.status, 0);
  kill(-pid, SIGKILL);  // nothing of the episode outlives it
  return r;
}

std::string tail_lines(const std::string& text, size_t n) {
  size_t pos = text.size();
  for (size_t k = 0; k < n && pos > 0; ++k) {
    pos = text.rfind('\n', pos - 1);
    if (pos == std::string::npos) return text;
  }
  return text.substr(pos + 1);
}

// At most `limit` commands at once across this instance's episodes; a
// limit of 0 means no limit.
class Slots {
 public:
  explicit Slots(int limit) : limit_(limit), free_(limit) {}
  void acquire() {
    if (limit_ <= 0) return;
    std::unique_lock<std::mutex> lock(m_);
    cv_.wait(lock, [&] { return free_ > 0; });
    --free_;
  }
  void release() {
    if (limit_ <= 0) return;
    std::lock_guard<std::mutex> lock(m_);
    ++free_;
    cv_.notify_one();
  }

 private:
  const int limit_;
  std::mutex m_;
  std::condition_variable cv_;
  int free_;
};

class Subproc {
 public:
  static constexpr const char* kName = "subproc";
  static constexpr const char* kVersion = "1.0.0";
  static constexpr const char* kDescription =
      "Runs a command per episode with OPENAI_/ANTHROPIC_ base URL and key set to the episode's gateway session; "
      "reward from its last stdout line or its set_reward calls.";
  static constexpr const char* kConfigSchema = R"({"type": "object", "keys": {
    "command": {"type": "string", "doc": "Shell command run once per episode (/bin/sh -c)."},
    "cwd": {"type": "string", "format": "path", "default": "", "doc": "Working directory; empty: the host's."},
    "timeout_seconds": {"type": "number", "default": 600, "minimum": 0.001, "doc": "The episode fails (the process group is killed) after this long."},
    "max_workers": {"type": "integer", "default": 0, "minimum": 0, "doc": "Commands running at once (AReaL's subproc_max_workers); 0 = no limit beyond the rollout's concurrency."},
    "env": {"type": "object", "default": {}, "doc": "Extra environment variables (string values)."}
  }})";
  static constexpr const char* kSampleData = R"({"question": "hello"})";

  explicit Subproc(const sdk::CreateContext& ctx) : config_(sdk::parse_object(ctx.config_json(), "subproc: config")),
                                                    slots_(config_.value("max_workers", 0)) {
    if (!config_.contains("command") || !config_["command"].is_string() || config_["command"].get<std::string>().empty())
      throw sdk::invalid_argument("subproc: 'command' is required");
    env_ = areal::workflows::config_env(config_, "subproc");
  }

  std::string run_episode(sdk::Episode& episode) {
    const auto session = areal::workflows::agent_session(episode, "subproc");
    std::vector<std::string> env = env_;
    for (auto& v : areal::workflows::session_env(session)) env.push_back(std::move(v));
    env.push_back("AREAL_EPISODE_ID=" + std::string(episode.id()));
    // The environment holds at most 128 KiB per variable (Linux's
    // MAX_ARG_STRLEN); a larger item is on stdin only.
    if (episode.data_json().size() <= kMaxEnvItemBytes) env.push_back("AREAL_EPISODE_DATA=" + std::string(episode.data_json()));
    slots_.acquire();
    ProcessResult r;
    try {
      r = run_command(config_["command"], config_.value("cwd", std::string()), env, std::string(episode.data_json()) + "\n",
                      config_.value("timeout_seconds", 600.0));
    } catch (...) {
      slots_.release();
      throw;
    }
    slots_.release();
    if (r.timed_out)
      throw sdk::Error(AREAL_CODE_DEADLINE_EXCEEDED, "subproc: the command ran past timeout_seconds; stderr: " + tail_lines(r.err, 5));
    if (!WIFEXITED(r.status) || WEXITSTATUS(r.status) != 0)
      throw sdk::Error(AREAL_CODE_UNAVAILABLE, "subproc: the command " +
                                                   (WIFEXITED(r.status) ? "exited with status " + std::to_string(WEXITSTATUS(r.status))
                                                                        : "was killed by signal " + std::to_string(WTERMSIG(r.status))) +
                                                   "; stderr: " + tail_lines(r.err, 5));
    // The last non-empty stdout line may carry the reward.
    std::string out = r.out;
    while (!out.empty() && (out.back() == '\n' || out.back() == '\r' || out.back() == ' ')) out.pop_back();
    const std::string last = out.substr(out.rfind('\n') == std::string::npos ? 0 : out.rfind('\n') + 1);
    json result = json::object();
    try {
      const json j = json::parse(last);
      if (j.is_object() && j.contains("reward")) {
        if (!j["reward"].is_number()) throw sdk::invalid_argument("subproc: the command's 'reward' must be a number, got " + j["reward"].dump());
        result = j;
      }
    } catch (const json::exception&) {
      // Not JSON: rewards, if any, came through /rl/set_reward.
    }
    return result.dump();
  }

 private:
  json config_;
  Slots slots_;
  std::vector<std::string> env_;
};

}  // namespace

AREAL_EXPORT_WORKFLOW(Subproc)
