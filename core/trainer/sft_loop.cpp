#include "core/trainer/sft_loop.hpp"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <numeric>
#include <random>

#include "core/plugin_host/error.hpp"
#include "core/telemetry/logging.hpp"
#include "core/trainer/training_log.hpp"

namespace areal::trainer {

namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

TrajectoryRow row_of(const SftExample& e) {
  TrajectoryRow r;
  const size_t n = e.input_ids.size();
  r.input_ids = e.input_ids;
  r.loss_mask.assign(n, 0);
  r.logprobs.assign(n, 0.0f);
  r.versions.assign(n, -1);
  for (size_t t = e.prompt_tokens; t < n; ++t) r.loss_mask[t] = 1, r.versions[t] = 0;
  return r;
}

}  // namespace

SftSummary run_sft(const SftOptions& opt, const StepPlugins& plugins, const std::vector<SftExample>& examples) {
  if (examples.empty()) throw Error(AREAL_CODE_INVALID_ARGUMENT, "sft: the dataset has no examples");
  for (const auto& e : examples)
    if (e.prompt_tokens >= e.input_ids.size())
      throw Error(AREAL_CODE_INVALID_ARGUMENT, "sft: an example has no completion tokens to train on");
  const auto start = Clock::now();
  fs::create_directories(opt.run_dir);
  TrainingLog tlog(opt.run_dir, opt.total_steps, 0);

  std::mt19937_64 rng(opt.seed);
  std::vector<size_t> order(examples.size());
  std::iota(order.begin(), order.end(), size_t{0});
  size_t next = order.size();  // start with a shuffle
  int64_t epoch = -1;

  SftSummary summary;
  for (int64_t step = 0; step < opt.total_steps; ++step) {
    const auto t_step = Clock::now();
    PackedBatch batch(0, 1.0f);
    for (size_t i = 0; i < opt.batch_size; ++i) {
      if (next == order.size()) std::shuffle(order.begin(), order.end(), rng), next = 0, ++epoch;
      const size_t k = order[next++];
      batch.add(row_of(examples[k]), static_cast<int64_t>(k));
    }
    json row = optimizer_step(plugins, batch, StepOptions{1.0f, false, 1, 1, opt.total_steps});
    const double seconds = std::chrono::duration<double>(Clock::now() - t_step).count();
    row["step"] = step + 1;
    row["epoch"] = epoch;
    row["rows"] = batch.rows();
    row["tokens"] = batch.tokens();
    row["loss_tokens"] = batch.loss_tokens();
    row["seconds_step"] = seconds;
    row["seconds_elapsed"] = std::chrono::duration<double>(Clock::now() - start).count();
    row["tokens_per_second"] = static_cast<double>(batch.tokens()) / std::max(seconds, 1e-9);
    summary.step_losses.push_back(row.value("algo_nll", row.value("loss", 0.0)));
    tlog.step(row);
    ++summary.steps_run;
  }
  if (opt.save_final) {
    const std::string final_dir = (fs::path(opt.run_dir) / "final").string();
    const std::string args = json{{"path", final_dir}, {"optimizer", false}}.dump();
    throw_if_status(plugins.train->save(plugins.train_self, areal_str{args.data(), args.size()}), "train save final");
    logging::get("sft")->info("final model (Hugging Face format) in {}", final_dir);
  }
  summary.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return summary;
}

}  // namespace areal::trainer
