#include "core/trainer/training_log.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <sstream>
#include <cstdint>
#include <exception>

#include "core/plugin_host/error.hpp"
#include "core/telemetry/logging.hpp"

namespace areal::trainer {

namespace fs = std::filesystem;

TrainingLog::TrainingLog(const std::string& run_dir, int64_t total_steps, int64_t resume_step)
    : run_dir_(run_dir), total_steps_(total_steps) {
  fs::create_directories(run_dir);
  const fs::path path = fs::path(run_dir) / "metrics.jsonl";
  if (resume_step > 0 && fs::exists(path)) {
    std::ifstream in(path);
    std::string line;
    while (std::getline(in, line)) {
      if (line.empty()) continue;
      try {
        nlohmann::json row = nlohmann::json::parse(line);
        if (row.value("step", int64_t{0}) <= resume_step) rows_.push_back(std::move(row));
      } catch (const std::exception&) {
        // A line cut short by a crash: drop it, the step is redone.
      }
    }
  }
  out_.open(path, std::ios::trunc);
  if (!out_) throw Error(AREAL_CODE_UNAVAILABLE, "cannot write " + path.string());
  for (const auto& row : rows_) out_ << row.dump() << "\n";
  out_.flush();
}

void TrainingLog::step(const nlohmann::json& row) {
  rows_.push_back(row);
  out_ << row.dump() << "\n";
  out_.flush();
  const int64_t step = row.value("step", int64_t{0});
  const int width = 20;
  const int filled = total_steps_ > 0 ? static_cast<int>(width * step / total_steps_) : width;
  std::string bar(static_cast<size_t>(filled), '#');
  bar.resize(width, '-');
  if (!row.contains("reward_mean")) {  // a supervised step: no rollouts
    logging::get("trainer")->info("[{}] step {}/{} | loss {:.4f} | {:.0f} tok/s | {:.2f} s/step", bar, step, total_steps_,
                                  row.value("loss", 0.0), row.value("tokens_per_second", 0.0), row.value("seconds_step", 0.0));
    return;
  }
  logging::get("trainer")->info("[{}] step {}/{} | reward {:.3f} | {:.1f} samples/s {:.0f} tok/s | staleness max {} | loss {:.4f} | {:.2f} s/step",
                                bar, step, total_steps_, row.value("reward_mean", 0.0), row.value("samples_per_second", 0.0),
                                row.value("tokens_per_second", 0.0), row.value("staleness_max", int64_t{0}),
                                row.value("loss", 0.0), row.value("seconds_step", 0.0));
}

void TrainingLog::eval(const nlohmann::json& row) {
  rows_.push_back(row);
  out_ << row.dump() << "\n";
  out_.flush();
}

void TrainingLog::write_reward_curve() const {
  std::vector<double> steps, rewards;
  for (const auto& r : rows_)
    if (!r.value("eval", false)) steps.push_back(r.value("step", 0.0)), rewards.push_back(r.value("reward_mean", 0.0));
  std::ofstream(fs::path(run_dir_) / "reward_curve.svg") << svg_line_chart(steps, rewards, "mean reward per step", "reward");
}

std::string svg_line_chart(const std::vector<double>& xs, const std::vector<double>& ys, const std::string& title,
                           const std::string& y_label) {
  const double W = 640, H = 400, left = 60, right = 20, top = 40, bottom = 50;
  double x0 = 0, x1 = 1, y0 = 0, y1 = 1;
  if (!xs.empty()) {
    x0 = *std::min_element(xs.begin(), xs.end()), x1 = *std::max_element(xs.begin(), xs.end());
    y0 = *std::min_element(ys.begin(), ys.end()), y1 = *std::max_element(ys.begin(), ys.end());
  }
  if (x1 <= x0) x1 = x0 + 1;
  if (y1 - y0 < 1e-9) y0 -= 0.5, y1 += 0.5;
  auto px = [&](double x) { return left + (x - x0) / (x1 - x0) * (W - left - right); };
  auto py = [&](double y) { return H - bottom - (y - y0) / (y1 - y0) * (H - top - bottom); };
  std::ostringstream s;
  s.precision(4);
  s << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W << "\" height=\"" << H << "\" font-family=\"sans-serif\" font-size=\"12\">\n"
    << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
    << "<text x=\"" << W / 2 << "\" y=\"24\" text-anchor=\"middle\" font-size=\"15\">" << title << "</text>\n"
    << "<line x1=\"" << left << "\" y1=\"" << H - bottom << "\" x2=\"" << W - right << "\" y2=\"" << H - bottom << "\" stroke=\"black\"/>\n"
    << "<line x1=\"" << left << "\" y1=\"" << top << "\" x2=\"" << left << "\" y2=\"" << H - bottom << "\" stroke=\"black\"/>\n"
    << "<text x=\"" << left - 6 << "\" y=\"" << py(y1) + 4 << "\" text-anchor=\"end\">" << y1 << "</text>\n"
    << "<text x=\"" << left - 6 << "\" y=\"" << py(y0) + 4 << "\" text-anchor=\"end\">" << y0 << "</text>\n"
    << "<text x=\"" << px(x0) << "\" y=\"" << H - bottom + 18 << "\" text-anchor=\"middle\">" << x0 << "</text>\n"
    << "<text x=\"" << px(x1) << "\" y=\"" << H - bottom + 18 << "\" text-anchor=\"middle\">" << x1 << "</text>\n"
    << "<text x=\"" << W / 2 << "\" y=\"" << H - 12 << "\" text-anchor=\"middle\">step</text>\n"
    << "<text x=\"16\" y=\"" << H / 2 << "\" text-anchor=\"middle\" transform=\"rotate(-90 16 " << H / 2 << ")\">" << y_label << "</text>\n"
    << "<polyline fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"2\" points=\"";
  for (size_t i = 0; i < xs.size(); ++i) s << px(xs[i]) << "," << py(ys[i]) << " ";
  s << "\"/>\n</svg>\n";
  return s.str();
}

}  // namespace areal::trainer
