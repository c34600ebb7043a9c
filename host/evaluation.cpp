#include "evaluation.hpp"

#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>
#include <exception>

#include "core/telemetry/logging.hpp"
#include "core/telemetry/metrics.hpp"

namespace areal::host {

namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

bool metric_safe(const std::string& key) {
  if (key.empty()) return false;
  for (char c : key)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  return true;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

Evaluator::Evaluator(EvaluationPlan plan) : plan_(std::move(plan)) {}

Evaluator::~Evaluator() {
  if (running_) running_->process->stop();
}

json Evaluator::result_row(const std::string& output, std::string* error) {
  // The last line that is a JSON object: agents may log before it (and the
  // log holds stderr too).
  std::istringstream lines(output);
  json result;
  for (std::string line; std::getline(lines, line);) {
    const auto first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos || line[first] != '{') continue;
    try {
      json j = json::parse(line);
      if (j.is_object()) result = std::move(j);
    } catch (const std::exception&) {
      // Not a result line.
    }
  }
  if (result.is_null()) {
    *error = "its output has no JSON object line (the result, e.g. {\"reward_mean\": 0.9})";
    return nullptr;
  }
  if (!result.contains("reward_mean") || !result["reward_mean"].is_number() || !std::isfinite(result["reward_mean"].get<double>())) {
    *error = "its result line has no numeric reward_mean: " + result.dump();
    return nullptr;
  }
  json row = json::object();
  for (const auto& [k, v] : result.items())
    if (v.is_number() && metric_safe(k)) row["eval_" + k] = v;
  return row;
}

void Evaluator::start(int64_t step, int64_t version) {
  const auto& s = plan_.settings;
  const fs::path dir = fs::path(plan_.run_dir) / "eval";
  fs::create_directories(dir);
  auto r = std::make_unique<Running>();
  r->step = step, r->version = version, r->started = Clock::now();
  r->log_path = (dir / ("step_" + std::to_string(step) + ".log")).string();
  fs::remove(r->log_path);
  std::ostringstream temperature;
  temperature << s.temperature;
  const std::map<std::string, std::string> env = {
      {"AREAL_GATEWAY_URL", plan_.gateway_url},
      {"AREAL_ADMIN_KEY", plan_.admin_key},
      {"OPENAI_BASE_URL", plan_.gateway_url + "/v1"},
      {"OPENAI_API_KEY", plan_.admin_key},
      {"ANTHROPIC_BASE_URL", plan_.gateway_url},
      {"ANTHROPIC_API_KEY", plan_.admin_key},  // an Anthropic-SDK evaluator must not send the operator's own key
      {"AREAL_EVAL_DATASET", plan_.dataset},
      {"AREAL_EVAL_GREEDY", s.greedy ? "1" : "0"},
      {"AREAL_EVAL_TEMPERATURE", s.greedy ? "0" : temperature.str()},
      {"AREAL_EVAL_N_SAMPLES", std::to_string(s.n_samples)},
      {"AREAL_EVAL_STEP", std::to_string(step)}};
  r->process = std::make_unique<AgentProcess>(s.agent_command, plan_.cwd, env, r->log_path);
  logging::get("eval")->info("evaluation of step {} (version {}) started: {} (log {})", step, version, s.agent_command, r->log_path);
  running_ = std::move(r);
}

json Evaluator::finish(int64_t version_now, bool wait) {
  Running& r = *running_;
  const auto limit = std::chrono::duration<double>(plan_.settings.timeout_seconds);
  std::string report = r.process->exit_report();
  while (report.empty()) {
    if (Clock::now() - r.started > limit) {
      r.process->stop();
      report = r.process->exit_report();
      break;
    }
    if (!wait) return nullptr;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    report = r.process->exit_report();
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - r.started).count();
  std::string error;
  json row;
  if (!r.process->succeeded()) {
    error = seconds > plan_.settings.timeout_seconds ? "it ran past evaluation.timeout_seconds and was stopped: " + report : report;
  } else {
    row = result_row(read_file(r.log_path), &error);
  }
  if (row.is_null()) row = json::object();
  row["eval"] = true;
  row["step"] = r.step;
  row["policy_version"] = r.version;         // served when it started
  row["policy_version_end"] = version_now;   // served when its result was collected
  row["eval_seconds"] = seconds;
  row["eval_failed"] = !error.empty();
  row["eval_log"] = r.log_path;
  auto log = logging::get("eval");
  Metrics& m = Metrics::global();
  m.add(std::string("areal_evaluations_total{status=\"") + (error.empty() ? "ok" : "failed") + "\"}", 1);
  if (!error.empty()) {
    row["eval_error"] = error;
    log->warn("evaluation of step {} failed: {}", r.step, error);
  } else {
    for (const auto& [k, v] : row.items())
      if (k.rfind("eval_", 0) == 0 && v.is_number() && k != "eval_failed") m.set("areal_" + k, v.get<double>());
    m.set("areal_eval_step", static_cast<double>(r.step));
    m.set("areal_eval_policy_version", static_cast<double>(r.version));
    log->info("evaluation of step {} (version {}..{}): reward_mean {:.4f} in {:.1f} s", r.step, r.version, version_now,
              row["eval_reward_mean"].get<double>(), seconds);
  }
  running_.reset();
  return row;
}

std::vector<json> Evaluator::after_step(int64_t step, int64_t version, bool last) {
  std::vector<json> rows;
  const auto& s = plan_.settings;
  if (running_)
    if (json row = finish(version, last); !row.is_null()) rows.push_back(std::move(row));
  if (last) {
    if (s.at_end || (s.every_steps > 0 && step % s.every_steps == 0)) {  // the final weights
      start(step, version);
      rows.push_back(finish(version, true));
    }
    return rows;
  }
  if (s.every_steps > 0 && step % s.every_steps == 0) {
    if (running_)
      logging::get("eval")->info("evaluation of step {} skipped: the one of step {} still runs", step, running_->step);
    else
      start(step, version);
  }
  return rows;
}

}  // namespace areal::host
