// Evaluation during training (the `evaluation` config section): the agent
// in eval mode, a command run every `every_steps` steps and after the last,
// beside the trainer (a step never waits for it). It calls the gateway with
// the admin key, so nothing it does is recorded or trained; its last stdout
// line that is a JSON object holds its results (at least reward_mean).
// Each result becomes a row of metrics.jsonl ({"eval": true, "step": ...,
// "eval_reward_mean": ...}) and areal_eval_* gauges on /metrics.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent_process.hpp"
#include "core/config/host_settings.hpp"

namespace areal::host {

struct EvaluationPlan {
  HostSettings::Evaluation settings;
  std::string dataset;      // absolute, or empty
  std::string cwd;          // the config's directory
  std::string run_dir;      // logs go to run_dir/eval/step_N.log
  std::string gateway_url;  // http://HOST:PORT
  std::string admin_key;
};

class Evaluator {
 public:
  explicit Evaluator(EvaluationPlan plan);
  ~Evaluator();  // stops an evaluation still running
  Evaluator(const Evaluator&) = delete;
  Evaluator& operator=(const Evaluator&) = delete;

  // After training step `step`, whose weights the backend now serves as
  // `version`: the rows of evaluations that finished since the last call,
  // and a new evaluation started when one is due (skipped, with a log
  // line, while one still runs). On the last step it waits: for a running
  // evaluation, then (at_end) for one of the final weights.
  std::vector<nlohmann::json> after_step(int64_t step, int64_t version, bool last);

  // Its result line as a metrics row, or why it is not one. Exposed for tests.
  static nlohmann::json result_row(const std::string& output, std::string* error);

 private:
  struct Running {
    std::unique_ptr<AgentProcess> process;
    int64_t step = 0, version = 0;
    std::chrono::steady_clock::time_point started;
    std::string log_path;
  };
  void start(int64_t step, int64_t version);
  // The row of the running evaluation once it has ended (or timed out);
  // null while it runs. `wait` blocks until then.
  nlohmann::json finish(int64_t version_now, bool wait);

  EvaluationPlan plan_;
  std::unique_ptr<Running> running_;
};

}  // namespace areal::host
