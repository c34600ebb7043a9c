#include "core/trainer/rollout_controller.hpp"

#include <algorithm>
#include <filesystem>
#include <numeric>
#include <optional>
#include <random>
#include <exception>

#include "core/plugin_host/error.hpp"
#include "core/telemetry/guarded_thread.hpp"
#include "core/telemetry/logging.hpp"
#include "core/telemetry/metrics.hpp"

namespace areal::trainer {

int64_t RolloutGroup::oldest_version() const {
  int64_t oldest = -1;
  for (const auto& r : rows) {
    const int64_t v = r.oldest_version();
    if (v >= 0) oldest = oldest < 0 ? v : std::min(oldest, v);
  }
  return oldest;
}

int64_t RolloutGroup::newest_version() const {
  int64_t newest = -1;
  for (const auto& r : rows) newest = std::max(newest, r.newest_version());
  return newest;
}

RolloutController::RolloutController(RolloutOptions options, EpisodeTarget target)
    : opt_(std::move(options)),
      target_(std::move(target)),
      staleness_(static_cast<int64_t>(opt_.batch_size), opt_.max_head_offpolicyness,
                 static_cast<int64_t>(opt_.max_concurrent ? opt_.max_concurrent : opt_.batch_size)),
      next_task_(opt_.first_task),
      untrained_watermark_(opt_.first_task) {
  if (opt_.online && opt_.gateway == nullptr)
    throw Error(AREAL_CODE_INVALID_ARGUMENT, "online mode needs a gateway with session slots (ABI 1.4)");
  if (!opt_.online && opt_.dataset.empty()) throw Error(AREAL_CODE_INVALID_ARGUMENT, "the rollout dataset is empty");
  if (opt_.n_samples == 0 || opt_.batch_size == 0) throw Error(AREAL_CODE_INVALID_ARGUMENT, "n_samples and batch_size must be >= 1");
  const std::filesystem::path p(opt_.records_path);
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path());
  records_.open(opt_.records_path, std::ios::app);
  if (!records_) throw Error(AREAL_CODE_UNAVAILABLE, "cannot write rollout records '" + opt_.records_path + "'");
}

RolloutController::~RolloutController() { stop(); }

void RolloutController::start() {
  const size_t workers = opt_.max_concurrent ? opt_.max_concurrent : opt_.batch_size;
  for (size_t i = 0; i < workers; ++i) threads_.push_back(guarded_thread("rollout", [this] { worker(); }));
}

// Dataset order: a fresh seeded shuffle per pass over the data.
size_t RolloutController::data_index_of(int64_t task) const {
  const size_t n = opt_.dataset.size();
  const uint64_t epoch = static_cast<uint64_t>(task) / n;
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 rng(opt_.seed * 0x9E3779B97F4A7C15ULL + epoch);
  std::shuffle(order.begin(), order.end(), rng);
  return order[static_cast<uint64_t>(task) % n];
}

void RolloutController::worker() {
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      pause_changed_.wait(lock, [&] { return stopped_ || !paused_; });
      if (stopped_) return;
    }
    if (!staleness_.acquire()) return;
    int64_t task = 0;
    {
      // Paused between the wait and the slot: give the slot back and wait again.
      std::lock_guard<std::mutex> lock(mutex_);
      if (paused_ || stopped_) {
        staleness_.release();
        continue;
      }
      if (opt_.max_tasks >= 0 && next_task_ >= opt_.first_task + opt_.max_tasks) {  // a rollout-only job is complete
        staleness_.release();
        return;
      }
      ++stats_.tasks_started;
      task = next_task_++;
    }
    RolloutGroup g;
    try {
      g = opt_.online ? run_online_task(task) : run_group(task);
    } catch (const std::exception& e) {
      // Stopping ends an online wait early; anything else is logged and the slot freed.
      std::lock_guard<std::mutex> lock(mutex_);
      if (!stopped_) logging::get("rollout")->warn("rollout task {} ended without data: {}", task, e.what());
      last_failure_ = "task " + std::to_string(task) + ": " + e.what();
    }
    const bool failed = g.rows.empty();
    bool accept = !failed;
    if (accept && opt_.filter == DynamicFilter::kMixedRewards) {
      // DAPO-style dynamic sampling: a group whose rewards are all equal has no learning signal.
      const auto [lo, hi] = std::minmax_element(g.episode_rewards.begin(), g.episode_rewards.end());
      accept = lo != g.episode_rewards.end() && *lo != *hi;
    }
    std::lock_guard<std::mutex> lock(mutex_);
    ++stats_.tasks_finished;
    finished_changed_.notify_all();
    // A group with an ok episode (kept or filtered) shows the pipeline works.
    if (!failed) failed_in_a_row_ = 0;
    else if (!opt_.online && ++failed_in_a_row_ == opt_.max_failed_groups_in_a_row) ready_changed_.notify_all();
    if (accept) {
      ++stats_.groups_accepted;
      if (opt_.keep_groups) ready_.push_back(std::move(g));
      staleness_.on_accepted();
      ready_changed_.notify_all();
    } else {
      failed ? ++stats_.groups_failed : ++stats_.groups_filtered;
      if (!g.session_id.empty()) settled_sessions_.push_back(g.session_id);
      // A filtered or failed group will never be trained: count it as handed out.
      handed_out_.insert(task);
      while (handed_out_.count(untrained_watermark_)) handed_out_.erase(untrained_watermark_++);
      staleness_.on_rejected();
    }
  }
}

namespace {

// A stable int64 for a session's string group id (FNV-1a), so agents'
// group ids become the algorithm's group_ids.
int64_t group_number(const std::string& id) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : id) h = (h ^ c) * 1099511628211ULL;
  return static_cast<int64_t>(h >> 1);
}

}  // namespace

void RolloutController::record(nlohmann::json record) {
  std::lock_guard<std::mutex> lock(mutex_);
  records_ << record.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  records_.flush();
}

RolloutGroup RolloutController::run_online_task(int64_t task) {
  opt_.gateway->grant_capacity(1);
  std::optional<recorder::SessionTrajectory> session;
  while (!session) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stopped_) throw Error(AREAL_CODE_CANCELLED, "rollout stopped");
    }
    try {
      session = opt_.gateway->take_finished(std::chrono::milliseconds(250));
    } catch (const Error& e) {
      // The gateway could not journal the hand-off (its state dir is full or
      // gone): the session stays with it. Try again, without spinning.
      if (e.code() != AREAL_CODE_UNAVAILABLE) throw;
      logging::get("rollout")->warn("task {}: {}", task, e.what());
      std::this_thread::sleep_for(std::chrono::seconds(1));
    }
  }
  nlohmann::json rec = session->to_json();
  RolloutGroup g;
  g.task = task;
  g.group_id = group_number(session->group_id.empty() ? session->session_id : session->group_id);
  g.session_id = session->session_id;
  g.rows = std::move(session->rows);
  if (!g.rows.empty()) g.episode_rewards.push_back(g.rows.back().reward);
  rec["task"] = task;
  rec["status"] = g.rows.empty() ? "empty" : "ok";
  record(std::move(rec));
  std::lock_guard<std::mutex> lock(mutex_);
  ++(g.rows.empty() ? stats_.episodes_failed : stats_.episodes_ok);
  for (double r : g.episode_rewards) stats_.reward_sum += r, ++stats_.rewards;
  for (const auto& r : g.rows) stats_.sampled_tokens += static_cast<int64_t>(r.sampled_tokens());
  return g;
}

RolloutGroup RolloutController::run_group(int64_t task) {
  RolloutGroup g;
  g.task = task;
  g.group_id = task;
  g.data_index = data_index_of(task);
  const std::string data = opt_.dataset[g.data_index].dump();
  std::vector<EpisodeOutcome> outcomes(opt_.n_samples);
  {
    // Joined however this scope ends (a thread that cannot start throws, and
    // the ones running read this frame).
    std::vector<std::thread> episodes;
    struct Joiner {
      std::vector<std::thread>& threads;
      ~Joiner() {
        for (auto& t : threads)
          if (t.joinable()) t.join();
      }
    } joiner{episodes};
    for (size_t k = 0; k < opt_.n_samples; ++k)
      episodes.push_back(guarded_thread("rollout", [&, k] {
        const std::string id = "t" + std::to_string(task) + "-e" + std::to_string(k);
        // An episode that throws outside the workflow (its record, its export) is a failed episode, not a lost group.
        if (contain("rollout", [&] {
              outcomes[k] = run_episode(target_, id, data, opt_.seed * 1000003ULL + static_cast<uint64_t>(task) * opt_.n_samples + k,
                                        "t" + std::to_string(task));
            })) {
          outcomes[k] = EpisodeOutcome{};
          outcomes[k].error = "the episode failed outside its workflow (see the log)";
          outcomes[k].record = {{"episode_id", id}, {"status", "error"}, {"error", outcomes[k].error}};
        }
      }));
  }
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& o : outcomes) {
    for (double r : o.rewards) stats_.reward_sum += r, ++stats_.rewards;
    for (const auto& r : o.rows) stats_.sampled_tokens += static_cast<int64_t>(r.sampled_tokens());
    o.record["task"] = task;
    o.record["data_index"] = g.data_index;
    records_ << o.record.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    Metrics::global().add("areal_rollout_episodes_total{status=\"" + std::string(o.ok ? "ok" : "error") + "\"}", 1);
    if (!o.ok) {
      ++g.failed_episodes, ++stats_.episodes_failed;
      last_failure_ = "episode " + o.record.value("episode_id", std::string()) + " (dataset item " + std::to_string(g.data_index) + "): " + o.error;
      logging::get("rollout")->warn("episode {} (dataset item {}) failed: {}", o.record.value("episode_id", std::string()),
                                    g.data_index, o.error);
      continue;
    }
    ++stats_.episodes_ok;
    g.unrewarded += o.unrewarded;
    if (!o.rows.empty()) g.episode_rewards.push_back(o.rows.back().reward);
    for (auto& r : o.rows) g.rows.push_back(std::move(r));
  }
  records_.flush();
  return g;
}

std::vector<RolloutGroup> RolloutController::take(size_t n) {
  std::vector<RolloutGroup> out;
  std::unique_lock<std::mutex> lock(mutex_);
  while (out.size() < n) {
    const auto too_many_failures = [&] { return opt_.max_failed_groups_in_a_row > 0 && failed_in_a_row_ >= opt_.max_failed_groups_in_a_row; };
    while (!ready_changed_.wait_for(lock, std::chrono::milliseconds(500),
                                    [&] { return stopped_ || !ready_.empty() || too_many_failures(); })) {
      if (!opt_.watchdog) continue;
      lock.unlock();
      const std::string problem = opt_.watchdog();
      lock.lock();
      if (!problem.empty()) throw Error(AREAL_CODE_UNAVAILABLE, problem);
    }
    if (stopped_) throw Error(AREAL_CODE_CANCELLED, "rollout stopped");
    if (ready_.empty())
      throw Error(AREAL_CODE_UNAVAILABLE, std::to_string(failed_in_a_row_) + " groups in a row had no successful episode "
                                          "(rollout.max_failed_groups_in_a_row); the last error: " + last_failure_);
    RolloutGroup g = std::move(ready_.front());
    ready_.pop_front();
    handed_out_.insert(g.task);
    while (handed_out_.count(untrained_watermark_)) handed_out_.erase(untrained_watermark_++);
    if (!g.session_id.empty()) settled_sessions_.push_back(g.session_id);  // trained in this step, or dropped below
    // Tokens of a version the trainer has not reached were sampled by weights
    // this run does not have: a run resumed from an earlier checkpoint than
    // the one its gateway's recovered sessions were sampled after. No
    // staleness bound can hold for them (the weights they came from are
    // gone); in a run that never resumed, none can exist (the engine takes a
    // version only after the trainer has).
    if (const int64_t newest = g.newest_version(); newest > version_) {
      ++stats_.groups_dropped_stale;
      staleness_.on_dropped();
      records_ << nlohmann::json{{"task", g.task}, {"session_id", g.session_id}, {"status", "dropped_lost_version"}, {"newest_version", newest},
                                 {"trainer_version", version_}}.dump()
               << "\n";
      logging::get("rollout")->warn("dropped group of task {}: its newest token is from version {}, which this run (at version {}) never had: "
                                    "sampled before a resume from an earlier checkpoint", g.task, newest, version_);
      continue;
    }
    const int64_t oldest = g.oldest_version();
    if (oldest >= 0 && version_ - oldest > opt_.max_head_offpolicyness) {
      ++stats_.groups_dropped_stale;
      staleness_.on_dropped();
      records_ << nlohmann::json{{"task", g.task}, {"session_id", g.session_id}, {"status", "dropped_stale"}, {"oldest_version", oldest},
                                 {"trainer_version", version_}}.dump()
               << "\n";
      logging::get("rollout")->warn("dropped group of task {}: its oldest token is from version {}, {} behind the trainer",
                                    g.task, oldest, version_ - oldest);
      continue;
    }
    out.push_back(std::move(g));
  }
  return out;
}

bool RolloutController::mark_settled_sessions(int64_t step) {
  if (!opt_.online || opt_.gateway == nullptr) return true;
  std::vector<std::string> ids;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ids.swap(settled_sessions_);
  }
  try {
    opt_.gateway->mark_trained(ids, step);
    return true;
  } catch (const std::exception& e) {
    logging::get("rollout")->error("the gateway could not record which {} sessions step {} holds: {}", ids.size(), step, e.what());
    std::lock_guard<std::mutex> lock(mutex_);
    settled_sessions_.insert(settled_sessions_.begin(), ids.begin(), ids.end());
    return false;
  }
}

void RolloutController::commit_checkpoint(int64_t step) {
  if (!opt_.online || opt_.gateway == nullptr) return;
  try {
    opt_.gateway->commit_checkpoint(step);
  } catch (const std::exception& e) {
    // Harmless to skip: the marks stay, and the next commit (or a resume) forgets them.
    logging::get("rollout")->warn("the gateway could not commit checkpoint {}: {}", step, e.what());
  }
}

void RolloutController::pause() {
  std::lock_guard<std::mutex> lock(mutex_);
  paused_ = true;
}

void RolloutController::resume() {
  std::lock_guard<std::mutex> lock(mutex_);
  paused_ = false;
  pause_changed_.notify_all();
}

void RolloutController::set_version(int64_t version) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    version_ = version;
  }
  staleness_.set_version(version);
}

void RolloutController::on_version_recovered(int64_t version) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    version_ = version;
  }
  staleness_.on_version_recovered(version);
}

void RolloutController::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopped_ = true;
    pause_changed_.notify_all();
    ready_changed_.notify_all();
  }
  staleness_.stop();
  for (auto& t : threads_)
    if (t.joinable()) t.join();
  threads_.clear();
}

bool RolloutController::wait_finished(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  return finished_changed_.wait_for(lock, timeout, [&] { return opt_.max_tasks >= 0 && stats_.tasks_finished >= opt_.max_tasks; });
}

int64_t RolloutController::next_untrained_task() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return untrained_watermark_;
}

RolloutStats RolloutController::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

}  // namespace areal::trainer
