// The supervised (SFT) loop behind `areal-host sft`: shuffled batches of
// token rows, each trained on its completion tokens with the algorithm
// plugin's loss (sft: mean token NLL), then a Hugging Face model folder.
// Real pipelines run such a stage before RL (e.g. to teach a reply format);
// its output is the model_path of the RL run.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/trainer/optimizer_step.hpp"

namespace areal::trainer {

// One training example: prompt then completion, loss on the completion.
struct SftExample {
  std::vector<int32_t> input_ids;
  size_t prompt_tokens = 0;  // input_ids[prompt_tokens:] are trained
};

struct SftOptions {
  int64_t total_steps = 1;
  size_t batch_size = 1;  // examples per step
  uint64_t seed = 1;      // shuffling
  std::string run_dir;    // metrics.jsonl, final/
  bool save_final = true;
};

struct SftSummary {
  int64_t steps_run = 0;
  double seconds = 0;
  std::vector<double> step_losses;  // the algorithm's per-step loss ("algo_nll" for sft)
};

// Each epoch visits every example once in a seeded random order; a step
// takes the next batch_size examples, wrapping into the next epoch.
// Throws areal::Error for a plugin failure or no examples.
SftSummary run_sft(const SftOptions& options, const StepPlugins& plugins, const std::vector<SftExample>& examples);

}  // namespace areal::trainer
