// What a training run reports: one JSON object per step in metrics.jsonl,
// a progress line per step on the console, and reward_curve.svg at the end.
#pragma once

#include <fstream>
#include <string>
#include <vector>
#include <cstdint>

#include <nlohmann/json.hpp>

namespace areal::trainer {

class TrainingLog {
 public:
  // Opens run_dir/metrics.jsonl. When resuming after `resume_step`, rows of
  // later steps (from a run that died after its last checkpoint) are
  // removed, so the curve has each step once.
  TrainingLog(const std::string& run_dir, int64_t total_steps, int64_t resume_step);

  // Appends the row and prints the progress line.
  void step(const nlohmann::json& row);
  // Appends an evaluation's row ({"eval": true, ...}) without a progress line.
  void eval(const nlohmann::json& row);
  // Writes reward_curve.svg from every row so far (resumed runs included).
  void write_reward_curve() const;
  const std::vector<nlohmann::json>& rows() const { return rows_; }

 private:
  std::string run_dir_;
  int64_t total_steps_;
  std::vector<nlohmann::json> rows_;
  std::ofstream out_;
};

// An SVG line chart of `values` against `steps` (own code, no plotting
// library): axes, min/max labels, title.
std::string svg_line_chart(const std::vector<double>& steps, const std::vector<double>& values, const std::string& title,
                           const std::string& y_label);

}  // namespace areal::trainer
