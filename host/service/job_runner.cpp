#include "job_runner.hpp"

#include <filesystem>
#include <fstream>
#include <exception>
#include <cstdint>
#include <vector>
#include <cstdlib>

#include "../gateway_startup.hpp"
#include "../launcher/run_launcher.hpp"
#include "../rollout_runner.hpp"
#include "../training_job.hpp"
#include "core/config/config_loader.hpp"
#include "core/plugin_host/error.hpp"
#include "core/plugin_host/string_writer.hpp"
#include "core/telemetry/guarded_thread.hpp"
#include "core/telemetry/logging.hpp"
#include "core/text/random_text.hpp"

namespace areal::host::service {
namespace {

namespace fs = std::filesystem;
using tenants::JobState;

}  // namespace

JobRunner::JobRunner(JobPlan plan, StateSink on_state)
    : plan_(std::move(plan)), on_state_(std::move(on_state)), admin_key_("sk-job-" + text::random_hex(48)), state_(plan_.job.state) {
  run_dir_ = (fs::path(plan_.output_dir) / plan_.job.experiment / plan_.job.trial).string();
}

JobRunner::~JobRunner() {
  std::lock_guard<std::mutex> control(control_);
  stop_ = Stop::kShutdown;  // the recorded state stays: a restart resumes the job
  if (trainer_.joinable()) trainer_.join();
  if (gateway_) gateway_->stop();
}

ResolvedConfig JobRunner::resolve(const JobPlan& plan, const std::string& admin_key, bool resume) {
  Json raw = config::load_yaml_file(plan.template_path);
  for (const auto& [k, v] : plan.settings.items()) config::set_dotted(raw, k, v);
  const tenants::Job& job = plan.job;
  config::set_dotted(raw, "experiment.name", job.experiment);
  config::set_dotted(raw, "experiment.trial", job.trial);
  config::set_dotted(raw, "experiment.output_dir", plan.output_dir);
  // The job's gateway is the service's to reach (loopback, any port, a
  // secret of this process) and serves the job's adapter only.
  config::set_dotted(raw, "gateway.host", "127.0.0.1");
  config::set_dotted(raw, "gateway.port", 0);
  config::set_dotted(raw, "gateway.admin_api_key", admin_key);
  config::set_dotted(raw, "gateway.adapter", "job-" + job.id.substr(4));
  config::set_dotted(raw, "gateway.state_dir", "auto");
  config::set_dotted(raw, "rollout.openai.mode", "online");
  config::set_dotted(raw, "rollout.openai.online_agent_command", "");  // users bring their agents
  if (const Json* k = config::find_dotted(raw, "rollout.openai.admin_api_key"); k && !k->is_null())
    config::set_dotted(raw, "rollout.openai.admin_api_key", admin_key);
  config::set_dotted(raw, "dashboard.enabled", false);
  config::set_dotted(raw, "trainer.resume", resume);
  ResolvedConfig rc = resolve_config(std::move(raw), fs::path(plan.template_path).parent_path().string());
  std::vector<std::string> problems = rc.errors;
  if (problems.empty()) {
    problems = run_job_problems(rc);
    if (!rc.plugins.count("train")) problems.push_back("the job template has no train section: a job trains");
  }
  if (!problems.empty()) {
    std::string all;
    for (const auto& p : problems) all += (all.empty() ? "" : "; ") + p;
    throw Error(AREAL_CODE_INVALID_ARGUMENT, all);
  }
  return rc;
}

bool JobRunner::has_checkpoint() const {
  std::error_code ec;
  const fs::path dir = fs::path(run_dir_) / "checkpoints";
  if (!fs::is_directory(dir, ec)) return false;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (fs::exists(e.path() / "host_state.json", ec)) return true;
  return false;
}

void JobRunner::start() {
  const ResolvedConfig rc = resolve(plan_, admin_key_, has_checkpoint());
  gateway_ = start_gateway(rc, plan_.engine, GatewayStart{/*training=*/true, /*online=*/true, /*fresh_training_run=*/false});
  logging::get("service")->info("job {} ({} of {}, {}/{}): gateway at {}, adapter {}, state {}", plan_.job.id, plan_.job.base_model,
                                plan_.job.user, plan_.job.experiment, plan_.job.trial, gateway_->url, adapter(), job_state_name(state()));
  const JobState s = state();
  if (s == JobState::kQueued || s == JobState::kRunning) launch_training();
  else serve_saved_adapter();  // finished or paused: answers its user, trains nothing
}

const std::string& JobRunner::gateway_url() const {
  static const std::string none;
  return gateway_ ? gateway_->url : none;
}

tenants::Job JobRunner::job_snapshot() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return plan_.job;
}

void JobRunner::release() {
  if (gateway_) gateway_->stop();
  const areal_inference_vtable& inf = *plan_.engine->vtable;
  if (inf.struct_size >= AREAL_OFFSET_OF_END(areal_inference_vtable, unload_adapter) && inf.unload_adapter != nullptr) {
    const std::string name = adapter();
    StatusPtr st(inf.unload_adapter(plan_.engine->self, areal_str{name.data(), name.size()}));  // NOT_FOUND when it never trained: fine
  }
}

JobState JobRunner::state() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return state_;
}

void JobRunner::set_state(JobState s, const std::string& message) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    state_ = s;
    plan_.job.state = s;
    plan_.job.message = message;
  }
  on_state_(plan_.job.id, s, message);
}

void JobRunner::launch_training() {
  if (trainer_.joinable()) trainer_.join();
  stop_ = Stop::kNone;
  set_state(JobState::kRunning, "");
  trainer_ = guarded_thread("service.job", [this] { train(); });
}

void JobRunner::train() {
  auto log = logging::get("service");
  try {
    const ResolvedConfig rc = resolve(plan_, admin_key_, has_checkpoint());
    RolloutPlan plan;
    plan.seed = rc.host.experiment.seed;
    plan.sessions = gateway_->sessions.get();
    plan.base_url = gateway_->url + "/v1";
    plan.output_path = run_dir_ + "/rollouts.jsonl";
    // train.world_size > 1: the job's ranks are processes of their own
    // (launcher.type local: on this machine; slurm: srun steps of the
    // service's allocation), started for this run of the loop.
    std::unique_ptr<launcher::RunLauncher> launched;
    if (train_world_size(rc) > 1) launched = std::make_unique<launcher::RunLauncher>(rc, run_dir_);
    RunningParts running;
    running.launcher = launched.get();
    running.inference = *plan_.engine;
    running.gateway = gateway_->vtable;
    running.gateway_self = gateway_->self();
    running.sessions = gateway_->sessions.get();
    running.gateway_url = gateway_->url;
    running.shared_engine_adapter = adapter();
    running.dashboard = false;
    running.stop_requested = [this]() -> std::string {
      switch (stop_.load()) {
        case Stop::kPause: return "the job was paused";
        case Stop::kCancel: return "the job was cancelled";
        case Stop::kShutdown: return "the service is stopping";
        case Stop::kNone: break;
      }
      return "";
    };
    const int code = run_training(rc, plan, running);
    if (code == 0) set_state(JobState::kFinished, "trained " + std::to_string(rc.host.trainer.total_steps) + " steps");
    else set_state(JobState::kFinished, "trained " + std::to_string(rc.host.trainer.total_steps) +
                                            " steps; the final evaluation failed (see eval/ in the job's run directory)");
  } catch (const std::exception& e) {
    switch (stop_.load()) {
      case Stop::kPause: set_state(JobState::kPaused, ""); break;
      case Stop::kCancel:
        set_state(JobState::kCancelled, "");
        release();
        break;
      case Stop::kShutdown: break;  // still running as far as the record goes: the next start resumes it
      case Stop::kNone:
        log->error("job {} failed: {}", plan_.job.id, e.what());
        set_state(JobState::kFailed, e.what());
        release();
        break;
    }
  }
}

void JobRunner::serve_saved_adapter() {
  // A finished job's final adapter, or a paused one's newest checkpoint's,
  // with the version its trainer_state.json / host_state.json gives.
  fs::path dir, state_file;
  std::error_code ec;
  if (state() == JobState::kFinished) {
    dir = fs::path(run_dir_) / "final" / "adapter";
    state_file = fs::path(run_dir_) / "final" / "trainer_state.json";
  } else {
    int64_t newest = -1;
    for (const auto& e : fs::directory_iterator(fs::path(run_dir_) / "checkpoints", ec)) {
      const std::string name = e.path().filename().string();
      if (name.rfind("step_", 0) != 0 || !fs::exists(e.path() / "host_state.json", ec)) continue;
      const int64_t step = std::strtoll(name.c_str() + 5, nullptr, 10);
      if (step > newest) newest = step, dir = e.path() / "adapter", state_file = e.path() / "host_state.json";
    }
  }
  auto log = logging::get("service");
  if (dir.empty() || !fs::exists(dir / "adapter_config.json", ec)) {
    log->warn("job {} has no saved adapter{}: it does not answer until it trains again", plan_.job.id, dir.empty() ? "" : " in " + dir.string());
    return;
  }
  std::ifstream in(state_file);
  const Json st = Json::parse(in, nullptr, false);
  const int64_t version = st.is_object() ? st.value("version", int64_t{0}) : 0;
  const std::string spec = Json{{"name", adapter()}, {"path", dir.string()}, {"version", version}}.dump();
  const areal_inference_vtable& inf = *plan_.engine->vtable;
  StatusPtr refused(inf.struct_size >= AREAL_OFFSET_OF_END(areal_inference_vtable, unload_adapter) && inf.load_adapter != nullptr
                        ? inf.load_adapter(plan_.engine->self, areal_str{spec.data(), spec.size()}, nullptr)
                        : make_status(AREAL_CODE_UNSUPPORTED, "the engine serves no adapters"));
  if (refused) {
    log->error("job {}: its adapter {} could not be loaded for serving: {}", plan_.job.id, dir.string(), status_message(refused.get()));
    return;
  }
  log->info("job {} serves its adapter from {} (version {})", plan_.job.id, dir.string(), version);
}

void JobRunner::pause() {
  std::lock_guard<std::mutex> control(control_);
  const JobState s = state();
  if (s != JobState::kRunning && s != JobState::kQueued)
    throw Error(AREAL_CODE_FAILED_PRECONDITION, "job " + plan_.job.id + " is " + job_state_name(s) + ": only a running job can be paused");
  stop_ = Stop::kPause;
  if (trainer_.joinable()) trainer_.join();  // at most one step
  if (state() == JobState::kRunning || state() == JobState::kQueued) set_state(JobState::kPaused, "");
}

void JobRunner::resume() {
  std::lock_guard<std::mutex> control(control_);
  const JobState s = state();
  if (s != JobState::kPaused)
    throw Error(AREAL_CODE_FAILED_PRECONDITION, "job " + plan_.job.id + " is " + job_state_name(s) + ": only a paused job can be resumed");
  launch_training();
}

void JobRunner::cancel() {
  std::lock_guard<std::mutex> control(control_);
  const JobState s = state();
  if (!tenants::job_state_active(s))
    throw Error(AREAL_CODE_FAILED_PRECONDITION, "job " + plan_.job.id + " is already " + job_state_name(s));
  stop_ = Stop::kCancel;
  if (trainer_.joinable()) trainer_.join();
  if (tenants::job_state_active(state())) {  // it was not training (paused)
    set_state(JobState::kCancelled, "");
    release();
  }
  // Training ended on its own while the cancel waited: nothing was cancelled,
  // and the answer says so (409), not 200 with a finished job.
  if (state() == JobState::kFinished)
    throw Error(AREAL_CODE_FAILED_PRECONDITION, "job " + plan_.job.id + " finished before the cancel took effect");
}

}  // namespace areal::host::service
