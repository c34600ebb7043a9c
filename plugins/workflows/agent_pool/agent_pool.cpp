// agent_pool: seed-style agent workflows (`run(data, **extra_kwargs)`) in a
// pool of long-lived worker processes (AReaL's rollout.openai.mode subproc).
//
// Each worker imports the agent once, then runs episodes one after another:
// the host writes one JSON line per episode on the worker's fd 3 and reads
// one JSON line back on its fd 4 (docs/agent-workflows.md, "Worker
// protocol"); stdout and stderr stay the agent's own and go to the log.
// Workers ship for Python (`module:Class` / `module:function`, sync or async
// `run`) and Node.js (`file.mjs`, `export async function run(data, opts)`).
//
// A worker that dies or runs past timeout_seconds fails only its episode and
// is replaced; an exception in `run` fails only its episode, traceback in the
// log.
#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <filesystem>
#include <memory>
#include <mutex>
#include <regex>
#include <thread>
#include <cstdint>
#include <string>
#include <vector>
#include <algorithm>
#include <exception>
#include <cstdlib>

#include <nlohmann/json.hpp>

#include "areal/sdk.hpp"
#include "areal/sdk_json.hpp"
#include "common/agent_session.hpp"
#include "common/plugin_dir.hpp"

extern char** environ;

namespace {

using nlohmann::json;
namespace sdk = areal::sdk;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// One worker process and the pipes to it.
class Worker {
 public:
  Worker(int index, const std::vector<std::string>& argv, const std::vector<std::string>& env, const std::string& cwd) : index_(index) {
    int req[2], resp[2], out[2], err[2];
    if (pipe2(req, O_CLOEXEC) || pipe2(resp, O_CLOEXEC) || pipe2(out, O_CLOEXEC) || pipe2(err, O_CLOEXEC))
      throw sdk::Error(AREAL_CODE_UNAVAILABLE, std::string("agent_pool: pipe: ") + std::strerror(errno));
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&fa, err[1], STDERR_FILENO);
    posix_spawn_file_actions_adddup2(&fa, req[0], 3);   // episodes in
    posix_spawn_file_actions_adddup2(&fa, resp[1], 4);  // results out
    if (!cwd.empty()) posix_spawn_file_actions_addchdir_np(&fa, cwd.c_str());
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    // Its own process group (stopping it reaches what the agent starts), and
    // a fresh process's signals (the host ignores SIGPIPE; a serving host's
    // blocked stop signals would survive exec).
    sigset_t none, pipe_only;
    sigemptyset(&none);
    sigemptyset(&pipe_only);
    sigaddset(&pipe_only, SIGPIPE);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    posix_spawnattr_setpgroup(&attr, 0);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &pipe_only);
    std::vector<std::string> args = argv, vars;
    for (char** e = environ; *e != nullptr; ++e) vars.emplace_back(*e);
    vars.insert(vars.end(), env.begin(), env.end());
    vars.push_back("AREAL_WORKER_INDEX=" + std::to_string(index));
    std::vector<char*> cargv, cenv;
    for (auto& a : args) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    for (auto& v : vars) cenv.push_back(v.data());
    cenv.push_back(nullptr);
    const int rc = posix_spawnp(&pid_, cargv[0], &fa, &attr, cargv.data(), cenv.data());
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    close(req[0]), close(resp[1]), close(out[1]), close(err[1]);
    to_worker_ = req[1], from_worker_ = resp[0];
    if (rc != 0) {
      close(to_worker_), close(from_worker_), close(out[0]), close(err[0]);
      pid_ = -1;
      throw sdk::Error(AREAL_CODE_UNAVAILABLE, "agent_pool: cannot start '" + argv[0] + "': " + std::strerror(rc));
    }
    group_ = pid_;
    if (pipe2(logger_wake_, O_CLOEXEC) != 0) logger_wake_[0] = logger_wake_[1] = -1;
    logger_ = sdk::guarded_thread("agent_pool", [this, o = out[0], e = err[0]] { forward_logs(o, e); });
  }

  ~Worker() {
    stop();
    // The logger ends at the outputs' end; a process that left the group
    // (setsid) may hold them open for good, so it is also told to finish.
    if (logger_wake_[1] >= 0) (void)!::write(logger_wake_[1], "x", 1);
    if (logger_.joinable()) logger_.join();
    for (int fd : logger_wake_)
      if (fd >= 0) close(fd);
  }

  // Ends the process (closing its input lets a healthy worker exit by
  // itself), then whatever it started: the group is ended even when the
  // worker itself has already exited or been reaped (its children stay in it).
  void stop() {
    if (to_worker_ >= 0) close(to_worker_), to_worker_ = -1;
    if (pid_ > 0) {
      for (int i = 0; i < 20 && waitpid(pid_, &status_, WNOHANG) == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(25));
      if (waitpid(pid_, &status_, WNOHANG) == 0) {
        kill(-pid_, SIGKILL);
        waitpid(pid_, &status_, 0);
      }
      pid_ = -1;
    }
    if (group_ > 0) kill(-group_, SIGKILL), group_ = -1;
    if (from_worker_ >= 0) close(from_worker_), from_worker_ = -1;
  }

  void kill_now() {
    if (pid_ > 0) kill(-pid_, SIGKILL);
    stop();
  }

  // False when the worker is gone (EPIPE: the host ignores SIGPIPE, so a
  // worker that died while idle is an error here, never the host's end).
  bool send(const std::string& line) {
    std::string text = line + "\n";
    size_t off = 0;
    while (off < text.size()) {
      const ssize_t n = ::write(to_worker_, text.data() + off, text.size() - off);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      off += static_cast<size_t>(n);
    }
    return true;
  }

  enum class Read { kLine, kTimeout, kClosed };
  // The next line from fd 4, waiting until `deadline`.
  Read receive(std::string& line, Clock::time_point deadline) {
    while (true) {
      if (auto nl = buffer_.find('\n'); nl != std::string::npos) {
        line = buffer_.substr(0, nl);
        buffer_.erase(0, nl + 1);
        return Read::kLine;
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (left <= 0) return Read::kTimeout;
      pollfd p{from_worker_, POLLIN, 0};
      const int r = poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 1000)));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) continue;
      char buf[65536];
      const ssize_t n = ::read(from_worker_, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return Read::kClosed;
      buffer_.append(buf, static_cast<size_t>(n));
    }
  }

  // How the process ended, for messages ("exited with status 1", ...).
  std::string exit_text() {
    if (pid_ > 0) {
      waitpid(pid_, &status_, 0);
      pid_ = -1;
    }
    if (WIFEXITED(status_)) return "exited with status " + std::to_string(WEXITSTATUS(status_));
    if (WIFSIGNALED(status_)) return "was killed by signal " + std::to_string(WTERMSIG(status_));
    return "ended";
  }

  std::string stderr_tail() {
    std::lock_guard<std::mutex> lock(tail_mutex_);
    std::string out;
    for (const auto& l : tail_) out += l + "\n";
    return out;
  }

  int index() const { return index_; }

 private:
  // The agent's stdout and stderr, line by line, into the host log.
  void forward_logs(int out_fd, int err_fd) {
    std::string partial[2];
    pollfd fds[3] = {{out_fd, POLLIN, 0}, {err_fd, POLLIN, 0}, {logger_wake_[0], POLLIN, 0}};
    int open = 2;
    bool finishing = false;  // told to finish: read what is there now, then stop
    while (open > 0) {
      if (!finishing && poll(fds, 3, -1) < 0 && errno != EINTR) break;
      if (!finishing && fds[2].revents != 0) {
        finishing = true;
        for (int i = 0; i < 2; ++i)
          if (fds[i].fd >= 0) fcntl(fds[i].fd, F_SETFL, fcntl(fds[i].fd, F_GETFL) | O_NONBLOCK);
      }
      for (int i = 0; i < 2; ++i) {
        if (fds[i].fd < 0 || (!finishing && fds[i].revents == 0)) continue;
        char buf[8192];
        const ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
        if (n <= 0 && !(n < 0 && errno == EINTR)) {  // the end, or (finishing) nothing more now
          if (!partial[i].empty()) line(i, partial[i]);
          close(fds[i].fd);
          fds[i].fd = -1;
          --open;
          continue;
        }
        if (n < 0) continue;
        partial[i].append(buf, static_cast<size_t>(n));
        for (size_t nl; (nl = partial[i].find('\n')) != std::string::npos;) {
          line(i, partial[i].substr(0, nl));
          partial[i].erase(0, nl + 1);
        }
      }
    }
    for (int i = 0; i < 2; ++i)
      if (fds[i].fd >= 0) close(fds[i].fd);
  }

  void line(int stream, const std::string& text) {
    sdk::log(stream == 0 ? AREAL_LOG_INFO : AREAL_LOG_WARN, "agent_pool", "[worker " + std::to_string(index_) + "] " + text);
    if (stream == 1) {
      std::lock_guard<std::mutex> lock(tail_mutex_);
      tail_.push_back(text);
      if (tail_.size() > 20) tail_.pop_front();
    }
  }

  int index_;
  pid_t pid_ = -1, group_ = -1;  // the worker, and its process group (outlives a reaped worker)
  int logger_wake_[2] = {-1, -1};
  int status_ = 0;
  int to_worker_ = -1, from_worker_ = -1;
  std::string buffer_;
  std::thread logger_;
  std::mutex tail_mutex_;
  std::deque<std::string> tail_;
};

class AgentPool {
 public:
  static constexpr const char* kName = "agent_pool";
  static constexpr const char* kVersion = "1.0.0";
  static constexpr const char* kDescription =
      "Seed-style agent workflows (a run(data, **extra_kwargs) method or function, Python or Node.js) in a pool of "
      "long-lived worker processes, one episode at a time each, with OPENAI_/ANTHROPIC_ base URL and key set per episode.";
  static constexpr const char* kConfigSchema = R"({"type": "object", "keys": {
    "agent": {"type": "string", "doc": "Python: module:Class, module:function or module (its run); a class is instantiated once per worker, its run may be sync or async. Node.js: path/to/agent.mjs exporting run (or agent.mjs:name), relative to cwd."},
    "language": {"type": "string", "enum": ["auto", "python", "node"], "default": "auto", "doc": "auto: node for .mjs/.js/.cjs agents, else python."},
    "interpreter": {"type": "string", "default": "", "doc": "The python or node executable (a virtual environment's python for its packages); empty: python3 or node on PATH."},
    "python_path": {"type": "array", "items": {"type": "string", "format": "path"}, "default": [], "doc": "Directories prepended to PYTHONPATH (where the agent's module lives); relative to the config file."},
    "cwd": {"type": "string", "format": "path", "default": "", "doc": "Working directory of the workers; empty: the host's."},
    "workers": {"type": "integer", "default": 4, "minimum": 1, "maximum": 1024, "doc": "Worker processes (AReaL's rollout.openai.subproc_max_workers)."},
    "timeout_seconds": {"type": "number", "default": 600, "minimum": 0.001, "doc": "An episode running longer fails; its worker is killed and replaced."},
    "startup_timeout_seconds": {"type": "number", "default": 120, "minimum": 0.001, "doc": "How long a worker may take to import the agent."},
    "env": {"type": "object", "default": {}, "doc": "Extra environment variables for the workers (string values)."},
    "worker_script": {"type": "string", "default": "", "doc": "A worker of your own speaking the worker protocol; empty: the shipped one for the language."}
  }})";
  static constexpr const char* kSampleData = R"({"question": "hello"})";

  explicit AgentPool(const sdk::CreateContext& ctx) : config_(sdk::parse_object(ctx.config_json(), "agent_pool: config")) {
    if (!config_.contains("agent") || !config_["agent"].is_string() || config_["agent"].get<std::string>().empty())
      throw sdk::invalid_argument("agent_pool: 'agent' is required (module:Class, module:function or file.mjs)");
    const std::string agent = config_["agent"];
    std::string language = config_.value("language", std::string("auto"));
    if (language == "auto") {
      // An .mjs/.js/.cjs file (optionally :export) is a Node.js agent; anything else a Python module.
      static const std::regex kNodeAgent(R"(\.(mjs|js|cjs)(:[A-Za-z_$][A-Za-z0-9_$]*)?$)");
      language = std::regex_search(agent, kNodeAgent) ? "node" : "python";
    }
    std::string interpreter = config_.value("interpreter", std::string());
    if (interpreter.empty()) interpreter = language == "node" ? "node" : "python3";
    std::string script = config_.value("worker_script", std::string());
    if (script.empty()) script = (areal::workflows::plugin_dir() / "agent_pool" / (language == "node" ? "node_worker.mjs" : "python_worker.py")).string();
    if (!fs::exists(script)) throw sdk::invalid_argument("agent_pool: worker script " + script + " is missing (install the agent_pool plugin with its workers)");
    argv_ = {interpreter, script, agent};
    env_ = areal::workflows::config_env(config_, "agent_pool");
    std::string pythonpath;
    for (const auto& p : config_.value("python_path", json::array())) pythonpath += fs::absolute(p.get<std::string>()).string() + ":";
    if (const char* old = std::getenv("PYTHONPATH")) pythonpath += old;
    if (!pythonpath.empty()) env_.push_back("PYTHONPATH=" + pythonpath);
    cwd_ = config_.value("cwd", std::string());
    timeout_s_ = config_.value("timeout_seconds", 600.0);
    startup_s_ = config_.value("startup_timeout_seconds", 120.0);
    const int n = config_.value("workers", 4);
    for (int i = 0; i < n; ++i) {
      slots_.push_back(start(i));
      idle_.push_back(i);
    }
  }

  ~AgentPool() {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& w : slots_) w.reset();
  }

  std::string run_episode(sdk::Episode& episode) {
    const auto session = areal::workflows::agent_session(episode, "agent_pool");
    json data = json::parse(episode.data_json(), nullptr, false);
    if (data.is_discarded()) data = std::string(episode.data_json());
    const json request = {{"op", "run"}, {"episode_id", std::string(episode.id())}, {"data", data}, {"base_url", session.base_url},
                          {"api_key", session.api_key}, {"anthropic_base_url", session.anthropic_base_url}};
    const int slot = acquire();
    const auto start_in_slot = [&] {  // a worker that cannot start gives the slot back
      try {
        slots_[slot] = start(slot);
      } catch (...) {
        release(slot);
        throw;
      }
    };
    if (!slots_[slot]) start_in_slot();
    bool sent = slots_[slot]->send(request.dump());
    if (!sent) {
      // It died while idle (between episodes): not this episode's doing, so
      // a fresh worker takes the episode.
      sdk::log(AREAL_LOG_WARN, "agent_pool", "agent worker " + std::to_string(slot) + " " + slots_[slot]->exit_text() +
                                                 " while idle; a fresh one takes episode " + std::string(episode.id()));
      slots_[slot].reset();
      start_in_slot();
      sent = slots_[slot]->send(request.dump());
    }
    Worker& w = *slots_[slot];
    const auto deadline = Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(timeout_s_ * 1000));
    std::string line;
    const Worker::Read r = sent ? w.receive(line, deadline) : Worker::Read::kClosed;
    if (r != Worker::Read::kLine) {
      std::string why;
      if (r == Worker::Read::kTimeout) {
        w.kill_now();
        why = "the agent ran past timeout_seconds (" + std::to_string(timeout_s_) + " s); its worker was killed and replaced";
      } else {
        const std::string tail = w.stderr_tail();
        why = "agent worker " + std::to_string(slot) + " " + w.exit_text() + " during the episode; it was replaced" + (tail.empty() ? "" : "; stderr:\n" + tail);
      }
      replace(slot);
      throw sdk::Error(r == Worker::Read::kTimeout ? AREAL_CODE_DEADLINE_EXCEEDED : AREAL_CODE_UNAVAILABLE, "agent_pool: " + why);
    }
    release(slot);
    const json reply = json::parse(line, nullptr, false);
    if (!reply.is_object() || !reply.contains("op"))
      throw sdk::Error(AREAL_CODE_INTERNAL, "agent_pool: the worker answered something that is not a protocol message: " + line.substr(0, 200));
    if (reply["op"] == "error") {
      const std::string tb = reply.value("traceback", std::string());
      if (!tb.empty()) sdk::log(AREAL_LOG_WARN, "agent_pool", "episode " + std::string(episode.id()) + " failed:\n" + tb);
      throw sdk::Error(AREAL_CODE_INVALID_ARGUMENT, "agent_pool: " + reply.value("message", std::string("the agent failed")));
    }
    if (reply["op"] != "result") throw sdk::Error(AREAL_CODE_INTERNAL, "agent_pool: unexpected worker message " + reply["op"].dump());
    json result = json::object();
    if (reply.contains("reward") && !reply["reward"].is_null()) result["reward"] = reply["reward"];
    return result.dump();
  }

 private:
  // A started worker that has imported the agent ("ready"), or an error
  // that says why not (an import error's traceback included).
  std::unique_ptr<Worker> start(int index) {
    auto w = std::make_unique<Worker>(index, argv_, env_, cwd_);
    std::string line;
    const auto r = w->receive(line, Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(startup_s_ * 1000)));
    if (r == Worker::Read::kLine) {
      const json m = json::parse(line, nullptr, false);
      if (m.is_object() && m.value("op", "") == "ready") return w;
      if (m.is_object() && m.value("op", "") == "fatal")
        throw sdk::invalid_argument("agent_pool: the worker cannot load agent '" + argv_[2] + "': " + m.value("message", std::string()) + "\n" +
                                    m.value("traceback", std::string()));
      throw sdk::Error(AREAL_CODE_INTERNAL, "agent_pool: the worker's first message is not ready: " + line.substr(0, 200));
    }
    if (r == Worker::Read::kTimeout) {
      w->kill_now();
      throw sdk::Error(AREAL_CODE_DEADLINE_EXCEEDED, "agent_pool: a worker did not load agent '" + argv_[2] + "' within startup_timeout_seconds");
    }
    const std::string tail = w->stderr_tail();
    throw sdk::Error(AREAL_CODE_UNAVAILABLE, "agent_pool: the worker (" + argv_[0] + " " + argv_[1] + ") " + w->exit_text() + " before it was ready" +
                                                 (tail.empty() ? "" : "; stderr:\n" + tail));
  }

  int acquire() {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [&] { return !idle_.empty(); });
    const int slot = idle_.front();
    idle_.pop_front();
    return slot;
  }
  void release(int slot) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      idle_.push_back(slot);
    }
    cv_.notify_one();
  }
  // A fresh worker in a failed one's slot; if it cannot start now, the slot
  // stays empty and the next episode that gets it starts one (or fails with
  // the reason): the pool never waits on a slot that has no worker.
  void replace(int slot) {
    slots_[slot].reset();
    try {
      slots_[slot] = start(slot);
    } catch (const std::exception& e) {
      sdk::log(AREAL_LOG_ERROR, "agent_pool", std::string("could not replace worker ") + std::to_string(slot) + ": " + e.what());
    }
    release(slot);
  }

  json config_;
  std::vector<std::string> argv_, env_;
  std::string cwd_;
  double timeout_s_ = 600, startup_s_ = 120;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<std::unique_ptr<Worker>> slots_;
  std::deque<int> idle_;
};

}  // namespace

AREAL_EXPORT_WORKFLOW(AgentPool)
