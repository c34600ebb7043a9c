// One job of the managed service: its own gateway (loopback, its own state
// dir, capacity and staleness bound, every request generated with the job's
// LoRA adapter) in front of the base model's shared engine, and its own
// trainer loop, run on a thread of its own, which trains the job's sessions
// only and hands each new adapter to the shared engine.
//
// Pause and cancel end the trainer loop before its next step (checkpoints
// stay); resume starts it again from the newest checkpoint, as a restart of
// the service does. The gateway keeps serving throughout, so a paused or
// finished job still answers its user (Phase 3: no recording, no training).
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "core/config/run_config.hpp"
#include "core/tenants/tenant_store.hpp"
#include "areal/plugin_api.h"

namespace areal::host {
struct RunningGateway;
}

namespace areal::host::service {

struct JobPlan {
  tenants::Job job;
  std::string template_path;                      // the base model's job config
  nlohmann::json settings = nlohmann::json::object();  // dotted key -> value over the template
  std::string output_dir;                         // experiment.output_dir: <state_dir>/users/<user>
  const areal_inference_ref* engine = nullptr;    // the base model's shared engine
};

class JobRunner {
 public:
  using StateSink = std::function<void(const std::string& job_id, tenants::JobState, const std::string& message)>;
  JobRunner(JobPlan plan, StateSink on_state);
  ~JobRunner();  // ends training (its state stays as recorded) and stops the gateway
  JobRunner(const JobRunner&) = delete;
  JobRunner& operator=(const JobRunner&) = delete;

  // The job's run config as a job would run now; INVALID_ARGUMENT lists its
  // problems. Used to check a new job before it is accepted.
  static ResolvedConfig resolve(const JobPlan& plan, const std::string& admin_key, bool resume);

  // Starts the gateway; then training, unless the job is paused or over
  // (then its saved adapter is loaded for serving: a finished job's final
  // one, a paused job's newest checkpoint's).
  void start();
  void pause();   // FAILED_PRECONDITION unless queued or running
  void resume();  // FAILED_PRECONDITION unless paused
  void cancel();  // FAILED_PRECONDITION once over

  tenants::JobState state() const;
  // Its identity (id, user, experiment, trial: never change).
  const tenants::Job& job() const { return plan_.job; }
  tenants::Job job_snapshot() const;  // with the state and message as of now
  const std::string& gateway_url() const;
  const std::string& admin_key() const { return admin_key_; }
  std::string adapter() const { return "job-" + plan_.job.id.substr(4); }
  const std::string& run_dir() const { return run_dir_; }

 private:
  enum class Stop { kNone, kPause, kCancel, kShutdown };
  void launch_training();
  void train();  // the training thread
  void set_state(tenants::JobState s, const std::string& message);
  bool has_checkpoint() const;
  void serve_saved_adapter();
  // A cancelled or failed job: its gateway stops and the engine forgets its adapter.
  void release();

  JobPlan plan_;
  StateSink on_state_;
  std::string admin_key_;
  std::string run_dir_;
  std::unique_ptr<RunningGateway> gateway_;
  std::mutex control_;  // one pause, resume or cancel at a time
  mutable std::mutex mutex_;  // state_
  tenants::JobState state_;
  std::atomic<Stop> stop_{Stop::kNone};
  std::thread trainer_;
};

}  // namespace areal::host::service
