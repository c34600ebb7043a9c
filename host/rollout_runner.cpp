#include "rollout_runner.hpp"

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "core/trainer/episode_runner.hpp"
#include "core/plugin_host/error.hpp"
#include "core/telemetry/logging.hpp"
#include "core/telemetry/metrics.hpp"

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
  std::filesystem::path out_path(plan.output_path);
  if (out_path.has_parent_path()) std::filesystem::create_directories(out_path.parent_path());
  std::ofstream out(plan.output_path, std::ios::trunc);
  if (!out) throw Error(AREAL_CODE_UNAVAILABLE, "cannot write rollout output '" + plan.output_path + "'");

  RolloutSummary summary;
  std::mutex mutex;  // guards `out` and `summary`
  std::atomic<size_t> next{0};
  const auto start = std::chrono::steady_clock::now();

  trainer::EpisodeTarget target{&workflow, workflow_self, &inference, inference_self, plan.base_url, plan.sessions};
  auto worker = [&] {
    for (size_t i = next++; i < plan.episodes; i = next++) {
      const size_t item = i % plan.dataset.size();
      const std::string id = "ep" + std::to_string(i);
      const std::string data = plan.dataset[item].dump();
      trainer::EpisodeOutcome o = trainer::run_episode(target, id, data, plan.seed + i);
      nlohmann::json& record = o.record;
      const std::string& error = o.error;
      record["data_index"] = item;
      size_t tokens = 0;
      for (const auto& r : o.rows) tokens += r.sampled_tokens();
      std::lock_guard<std::mutex> lock(mutex);
      out << record.dump() << "\n";
      out.flush();
      summary.tokens += tokens;
      if (error.empty()) ++summary.ok;
      else {
        ++summary.failed;
        log->warn("episode {} (dataset item {}) failed: {}", id, item, error);
      }
      for (double r : o.rewards) summary.reward_sum += r, ++summary.rewarded;
      Metrics::global().add("areal_rollout_episodes_total{status=\"" + std::string(error.empty() ? "ok" : "error") + "\"}", 1);
      const size_t done = summary.ok + summary.failed;
      if (done % std::max<size_t>(1, plan.episodes / 10) == 0 || done == plan.episodes)
        log->info("episodes {}/{} | failed {} | mean reward {:.4f} | tokens {}", done, plan.episodes, summary.failed,
                  summary.mean_reward(), summary.tokens);
    }
  };
  std::vector<std::thread> threads;
  for (size_t t = 0; t < std::min(plan.concurrency, plan.episodes); ++t) threads.emplace_back(worker);
  for (auto& t : threads) t.join();
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return summary;
}

}  // namespace areal::host
