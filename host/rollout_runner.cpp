#include "rollout_runner.hpp"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <cstdint>
#include <exception>

#include "core/plugin_host/error.hpp"
#include "core/telemetry/logging.hpp"
#include "core/trainer/rollout_controller.hpp"

namespace areal::host {

std::vector<nlohmann::json> read_dataset(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error(AREAL_CODE_NOT_FOUND, "cannot read dataset '" + path + "'");
  std::vector<nlohmann::json> items;
  std::string line;
  for (size_t n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const std::exception& e) {
      throw Error(AREAL_CODE_INVALID_ARGUMENT, path + ":" + std::to_string(n) + ": not valid JSON: " + e.what());
    }
    if (!j.is_object()) throw Error(AREAL_CODE_INVALID_ARGUMENT, path + ":" + std::to_string(n) + ": each line must be a JSON object");
    items.push_back(std::move(j));
  }
  if (items.empty()) throw Error(AREAL_CODE_INVALID_ARGUMENT, "dataset '" + path + "' has no items");
  return items;
}

RolloutSummary run_rollout(const RolloutPlan& plan, const areal_workflow_vtable& workflow, void* workflow_self,
                           const areal_inference_vtable& inference, void* inference_self) {
  auto log = logging::get("rollout");
  // The trainer's rollout loop without a trainer: one episode per task, as
  // many in flight as `concurrency`, no staleness bound (the version never
  // moves), every record written, no group kept.
  trainer::RolloutOptions opt;
  opt.dataset = plan.dataset;
  opt.n_samples = 1;
  opt.batch_size = std::max<size_t>(1, plan.concurrency);
  opt.max_concurrent = opt.batch_size;
  opt.max_head_offpolicyness = int64_t{1} << 40;
  opt.seed = plan.seed;
  opt.records_path = plan.output_path;
  opt.max_tasks = static_cast<int64_t>(plan.episodes);
  opt.keep_groups = false;
  std::ofstream(plan.output_path, std::ios::trunc);  // a rollout job writes fresh records
  const trainer::EpisodeTarget target{&workflow, workflow_self, &inference, inference_self, plan.base_url, plan.sessions};

  const auto start = std::chrono::steady_clock::now();
  trainer::RolloutController controller(std::move(opt), target);
  controller.start();
  const int64_t every = std::max<int64_t>(1, static_cast<int64_t>(plan.episodes) / 10);
  int64_t reported = 0;
  for (bool done = false; !done;) {
    done = controller.wait_finished(std::chrono::milliseconds(200));
    const trainer::RolloutStats s = controller.stats();
    if (s.tasks_finished / every > reported / every || (done && s.tasks_finished > reported)) {
      reported = s.tasks_finished;
      log->info("episodes {}/{} | failed {} | mean reward {:.4f} | tokens {}", s.tasks_finished, plan.episodes, s.episodes_failed,
                s.rewards ? s.reward_sum / static_cast<double>(s.rewards) : 0.0, s.sampled_tokens);
    }
  }
  controller.stop();
  const trainer::RolloutStats s = controller.stats();
  RolloutSummary summary;
  summary.ok = static_cast<size_t>(s.episodes_ok);
  summary.failed = static_cast<size_t>(s.episodes_failed);
  summary.rewarded = static_cast<size_t>(s.rewards);
  summary.reward_sum = s.reward_sum;
  summary.tokens = static_cast<size_t>(s.sampled_tokens);
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return summary;
}

}  // namespace areal::host
