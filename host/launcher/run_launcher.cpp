#include "run_launcher.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <thread>
#include <algorithm>
#include <exception>

#include <Poco/Net/HTTPClientSession.h>
#include <Poco/Net/HTTPRequest.h>
#include <Poco/Net/HTTPResponse.h>
#include <Poco/URI.h>

#include "core/plugin_host/error.hpp"
#include "core/telemetry/logging.hpp"
#include "shell.hpp"

namespace areal::host::launcher {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t at = 0; (at = s.find(from, at)) != std::string::npos; at += to.size()) s.replace(at, from.size(), to);
  return s;
}

}  // namespace

RunLauncher::RunLauncher(const ResolvedConfig& rc, std::string run_dir)
    : run_dir_(std::move(run_dir)),
      log_dir_(run_dir_ + "/logs"),
      self_exe_(self_executable()),
      type_(rc.host.launcher.type),
      settings_(rc.host.launcher),
      processes_([this](const ProcessExit& e) { on_exit(e); }) {
  if (type_ == "slurm" && std::getenv("SLURM_JOB_ID") == nullptr)
    throw Error(AREAL_CODE_INVALID_ARGUMENT,
                "launcher.type is slurm, but this is not inside a Slurm allocation: submit the run with `areal-host launch --config ...`");
}

RunLauncher::~RunLauncher() { stop_all(); }

void RunLauncher::stop_all() {
  stopping_ = true;
  processes_.stop_all();
}

void RunLauncher::await_ranks() {
  processes_.wait_exit(type_ == "slurm" ? "ranks" : "rank", 10);
}

std::string RunLauncher::fatal() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return fatal_;
}

void RunLauncher::on_exit(const ProcessExit& e) {
  // Once the run is over, processes ending is expected, except a kill we did not send.
  if (e.requested || (stopping_ && !(e.status_known && WIFSIGNALED(e.status)))) return;
  auto log = logging::get("launcher");
  std::lock_guard<std::mutex> lock(mutex_);
  if (e.name.rfind("server", 0) == 0) {
    ++servers_ended_;
    log->error("inference {} (pid {}) {}; it leaves the pool ({} of {} servers left; its log: {}/{}.log)", e.name, e.pid, e.describe(),
               servers_expected_ - servers_ended_, servers_expected_, log_dir_, e.name);
    if (servers_ended_ >= servers_expected_ && fatal_.empty())
      fatal_ = "every inference server the launcher started has ended (the last: " + e.name + " " + e.describe() + "; logs in " + log_dir_ + ")";
    return;
  }
  log->error("{} (pid {}) {}; ending the run (its log: {}/{}.log)", e.name, e.pid, e.describe(), log_dir_, e.name);
  if (fatal_.empty()) fatal_ = e.name + " (pid " + std::to_string(e.pid) + ") " + e.describe() + "; see " + log_dir_ + "/" + e.name + ".log";
}

std::vector<std::string> RunLauncher::allocation_nodes() const {
  const char* list = std::getenv("SLURM_JOB_NODELIST");
  if (list == nullptr) throw Error(AREAL_CODE_INVALID_ARGUMENT, "SLURM_JOB_NODELIST is not set (not inside a Slurm allocation)");
  std::vector<std::string> nodes;
  const CommandOutput hostnames = run_shell("scontrol show hostnames " + shell_quote(list));
  if (hostnames.status != 0) throw Error(AREAL_CODE_UNAVAILABLE, "scontrol show hostnames failed: " + hostnames.output);
  const std::string& text = hostnames.output;
  for (size_t start = 0; start < text.size();) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    if (end > start) nodes.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  if (nodes.empty()) throw Error(AREAL_CODE_UNAVAILABLE, "scontrol show hostnames gave no nodes for " + std::string(list));
  return nodes;
}

std::vector<std::string> RunLauncher::srun_prefix(int nodes, int relative, int tasks, const std::vector<std::string>& extra) const {
  std::vector<std::string> a = {"srun", "--nodes=" + std::to_string(nodes), "--ntasks=" + std::to_string(tasks),
                                "--relative=" + std::to_string(relative), "--exact", "--kill-on-bad-exit=1", "--unbuffered"};
  // Slurm 22.05 to 23.02 do not pass sbatch's --cpus-per-task on to srun:
  // without it every rank and server step would get one CPU.
  if (settings_.slurm.cpus_per_task > 0) a.push_back("--cpus-per-task=" + std::to_string(settings_.slurm.cpus_per_task));
  a.insert(a.end(), extra.begin(), extra.end());
  a.insert(a.end(), settings_.slurm.srun_args.begin(), settings_.slurm.srun_args.end());
  return a;
}

namespace {

// Whether `url` answers GET /health with 200 now.
bool answers_health(const std::string& url) {
  try {
    const Poco::URI uri(url);
    Poco::Net::HTTPClientSession s(uri.getHost(), uri.getPort());
    s.setTimeout(Poco::Timespan(5, 0));
    Poco::Net::HTTPRequest rq("GET", "/health", Poco::Net::HTTPMessage::HTTP_1_1);
    s.sendRequest(rq);
    Poco::Net::HTTPResponse rs;
    s.receiveResponse(rs).ignore(1 << 20);
    return rs.getStatus() == Poco::Net::HTTPResponse::HTTP_OK;
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace

void RunLauncher::start_servers(ResolvedConfig& rc) {
  const auto& sv = settings_.servers;
  if (sv.count == 0) return;
  const std::string plugin = rc.plugins.count("inference") ? rc.plugins.at("inference")->name() : "";
  if (plugin != "sglang" && plugin != "vllm")
    throw Error(AREAL_CODE_INVALID_ARGUMENT, "launcher.servers.count > 0 needs inference.plugin sglang or vllm (a remote backend), not '" +
                                                 plugin + "': the local plugin already runs in this process");
  fs::create_directories(log_dir_);
  std::string model = sv.model_path.empty() ? rc.effective["train"].value("model_path", std::string()) : rc.path(sv.model_path);
  if (model.empty()) throw Error(AREAL_CODE_INVALID_ARGUMENT, "launcher.servers: set launcher.servers.model_path (there is no train.model_path)");
  std::vector<std::string> nodes;
  int first_node = 0, node_count = 1;
  if (type_ == "slurm") {
    nodes = allocation_nodes();
    first_node = settings_.slurm.train_nodes > 0 && settings_.slurm.train_nodes < static_cast<int>(nodes.size()) ? settings_.slurm.train_nodes : 0;
    node_count = static_cast<int>(nodes.size()) - first_node;
  }
  auto log = logging::get("launcher");
  {
    std::lock_guard<std::mutex> lock(mutex_);
    servers_expected_ = sv.count;
  }
  json urls = json::array();
  std::vector<std::pair<std::string, std::string>> by_command;  // (name, url) of servers started by launcher.servers.command
  for (int i = 0; i < sv.count; ++i) {
    const std::string name = "server" + std::to_string(i);
    const int node = first_node + i % node_count;
    ProcessSpec spec;
    spec.name = name;
    spec.log_path = log_dir_ + "/" + name + ".log";
    std::string url;
    if (sv.command.empty()) {
      json engine = sv.engine;
      engine["model_path"] = model;
      spec.argv = {(fs::path(self_exe_).parent_path() / "areal-engine-server").string(), "--protocol", plugin, "--host",
                   type_ == "slurm" ? "0.0.0.0" : "127.0.0.1", "--port", "0", "--plugin", "local", "--engine-config", engine.dump()};
      if (plugin == "vllm") spec.argv.insert(spec.argv.end(), {"--logprobs-mode", "processed_logprobs"});  // what the vllm plugin reads
    } else {
      const std::string host = type_ == "slurm" ? nodes[node] : "127.0.0.1";
      const int port = sv.port > 0 ? sv.port + i : (type_ == "slurm" ? 30000 + i : ranks::free_port("127.0.0.1"));
      if (type_ != "slurm" && sv.port > 0) {
        // A port taken here (another run's server, a leftover SGLang) would
        // answer /health for ours: the run would roll out on someone else's weights.
        try {
          int bound = 0;
          ::close(ranks::listen_on("127.0.0.1", port, &bound));
        } catch (const std::exception&) {
          throw Error(AREAL_CODE_FAILED_PRECONDITION, "inference " + name + ": port " + std::to_string(port) + " (launcher.servers.port + " +
                                                          std::to_string(i) + ") is in use on this machine (another run's server?); "
                                                          "launcher.servers.port: 0 picks free ports");
        }
      }
      std::string cmd = replace_all(sv.command, "{host}", type_ == "slurm" ? "0.0.0.0" : host);
      cmd = replace_all(replace_all(replace_all(cmd, "{port}", std::to_string(port)), "{index}", std::to_string(i)), "{model_path}", shell_quote(model));
      spec.argv = {"/bin/sh", "-c", "cd " + shell_quote(rc.base_dir) + " && exec " + cmd};
      url = "http://" + host + ":" + std::to_string(port);
      by_command.emplace_back(name, url);
    }
    if (type_ == "slurm") {
      std::vector<std::string> extra;
      if (settings_.slurm.gpus_per_server > 0) extra.push_back("--gpus=" + std::to_string(settings_.slurm.gpus_per_server));
      std::vector<std::string> argv = srun_prefix(1, node, 1, extra);
      argv.insert(argv.end(), spec.argv.begin(), spec.argv.end());
      spec.argv = argv;
    }
    const pid_t pid = processes_.start(spec);
    log->info("inference {} started (pid {}{}): log {}", name, pid, type_ == "slurm" ? ", srun on " + nodes[node] : "", spec.log_path);
    if (url.empty()) {  // the local engine says where it listens
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(sv.start_timeout_seconds);
      while (url.empty()) {
        const std::string line = processes_.find_line(name, "listening at ");
        if (!line.empty()) url = line.substr(line.find("listening at ") + 13);
        else if (!processes_.running(name))
          throw Error(AREAL_CODE_UNAVAILABLE, "inference " + name + " ended before it listened; see " + spec.log_path);
        else if (std::chrono::steady_clock::now() > deadline)
          throw Error(AREAL_CODE_UNAVAILABLE, "inference " + name + " did not listen within launcher.servers.start_timeout_seconds (" +
                                                  std::to_string(sv.start_timeout_seconds) + " s); see " + spec.log_path);
        else std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    }
    log->info("inference {} at {}", name, url);
    urls.push_back(url);
  }
  // A server started by command (SGLang, vLLM) may take minutes to import,
  // load weights and capture graphs: it has start_timeout_seconds to answer
  // /health, and one that exits meanwhile fails the start at once (the
  // plugin's own wait, startup_timeout_s, is for servers started by hand).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(sv.start_timeout_seconds);
  for (const auto& [name, url] : by_command) {
    while (!answers_health(url)) {
      if (!processes_.running(name))
        throw Error(AREAL_CODE_UNAVAILABLE, "inference " + name + " ended before it answered " + url + "/health; see " + log_dir_ + "/" + name + ".log");
      if (std::chrono::steady_clock::now() > deadline)
        throw Error(AREAL_CODE_UNAVAILABLE, "inference " + name + " did not answer " + url + "/health within launcher.servers.start_timeout_seconds (" +
                                                std::to_string(sv.start_timeout_seconds) + " s); see " + log_dir_ + "/" + name + ".log");
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
    log->info("inference {} answers {}/health", name, url);
  }
  rc.effective["inference"]["servers"] = urls;  // the plugin waits for them to answer /health
}

std::unique_ptr<ranks::RemoteTrainRanks> RunLauncher::start_train_ranks(const ResolvedConfig& rc) {
  const int world = train_world_size(rc);
  if (world <= 1) return nullptr;
  fs::create_directories(log_dir_);
  const bool slurm = type_ == "slurm";
  auto group = std::make_unique<ranks::RemoteTrainRanks>(world, slurm ? "" : "127.0.0.1");
  const std::string controller = (slurm ? ranks::host_name() : std::string("127.0.0.1")) + ":" + std::to_string(group->port());
  auto log = logging::get("launcher");
  if (slurm) {
    const std::vector<std::string> nodes = allocation_nodes();
    const int train_nodes = settings_.slurm.train_nodes > 0 ? std::min<int>(settings_.slurm.train_nodes, nodes.size()) : nodes.size();
    std::vector<std::string> extra;
    if (settings_.slurm.gpus_per_task > 0) extra.push_back("--gpus-per-task=" + std::to_string(settings_.slurm.gpus_per_task));
    ProcessSpec spec;
    spec.name = "ranks";
    spec.log_path = log_dir_ + "/ranks.log";
    spec.argv = srun_prefix(std::min(train_nodes, world), 0, world, extra);
    spec.argv.insert(spec.argv.end(), {"--label", self_exe_, "train-rank", "--controller", controller});
    const pid_t pid = processes_.start(spec);
    log->info("train ranks 0-{}: srun (pid {}) on {} node(s), controller {}; log {}", world - 1, pid, std::min(train_nodes, world), controller,
              spec.log_path);
  } else {
    for (int r = 0; r < world; ++r) {
      ProcessSpec spec;
      spec.name = "rank" + std::to_string(r);
      spec.log_path = log_dir_ + "/" + spec.name + ".log";
      spec.argv = {self_exe_, "train-rank", "--controller", controller, "--rank", std::to_string(r)};
      const pid_t pid = processes_.start(spec);
      log->info("train rank {} started (pid {}); log {}", r, pid, spec.log_path);
    }
  }
  group->accept_ranks(settings_.rank_start_timeout_seconds, [this] {
    if (const std::string f = fatal(); !f.empty()) throw Error(AREAL_CODE_UNAVAILABLE, f);
  });
  ranks::RankPlugin train, algorithm;
  const auto& tp = rc.plugins.at("train");
  const auto& ap = rc.plugins.at("algorithm");
  train.path = tp->builtin() ? "" : tp->path(), train.name = tp->name(), train.config = json::parse(rc.section_json("train"));
  algorithm.path = ap->builtin() ? "" : ap->path(), algorithm.name = ap->name(), algorithm.config = json::parse(rc.section_json("algorithm"));
  const std::string init = group->create(train, algorithm, rc.host.log_level);
  log->info("{} train ranks ready: {} over {}; rendezvous {}", world, tp->name(), controller, init);
  return group;
}

}  // namespace areal::host::launcher
