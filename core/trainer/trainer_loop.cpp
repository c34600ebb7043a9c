#include "core/trainer/trainer_loop.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <numeric>

#include "core/plugin_host/error.hpp"
#include "core/telemetry/logging.hpp"
#include "core/plugin_host/string_writer.hpp"
#include "core/trainer/training_log.hpp"

namespace areal::trainer {

namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// areal_loss_fn over the algorithm plugin's loss slot. It also keeps the
// algorithm's per-micro-batch stats, averaged by loss tokens, which the
// train plugin would otherwise not see.
struct LossBridge {
  const areal_algorithm_vtable* vt;
  void* self;
  std::map<std::string, double> weighted;
  double tokens = 0;

  static areal_status* eval(void* ctx, const areal_tensor_map* batch, double* out_loss, DLTensor* out_grad,
                            const areal_writer* out_stats) {
    auto* b = static_cast<LossBridge*>(ctx);
    StringCollector w;
    areal_status* st = b->vt->loss(b->self, batch, out_loss, out_grad, w.writer());
    if (st != nullptr) return st;
    if (out_stats != nullptr && !w.text.empty()) {
      if (areal_status* ws = out_stats->write(out_stats->ctx, areal_str{w.text.data(), w.text.size()})) return ws;
    }
    try {
      const json stats = json::parse(w.text.empty() ? "{}" : w.text);
      const double n = stats.value("loss_tokens", 1.0);
      for (const auto& [k, v] : stats.items())
        if (v.is_number() && k != "loss_tokens") b->weighted[k] += v.get<double>() * n;
      b->tokens += n;
    } catch (const std::exception&) {
      // Stats are diagnostics; a plugin writing bad JSON loses only them.
    }
    return nullptr;
  }
  json averages() const {
    json out = json::object();
    for (const auto& [k, v] : weighted) out[k] = tokens > 0 ? v / tokens : 0.0;
    return out;
  }
};

std::string json_str(const json& j) { return j.dump(); }
areal_str to_str(const std::string& s) { return areal_str{s.data(), s.size()}; }

void call(areal_status* st, const char* what) { throw_if_status(st, what); }

// A train plugin's log-probs of the batch's tokens, copied out of the
// plugin-owned DLPack tensor (released before returning).
std::vector<float> logprobs_of(const areal_train_vtable& vt, void* self, PackedBatch& batch, float temperature, const char* what) {
  TensorMapBuilder m = batch.map();
  DLManagedTensor* lp = nullptr;
  call(vt.compute_logprobs(self, m.get(), temperature, &lp), what);
  std::unique_ptr<DLManagedTensor, void (*)(DLManagedTensor*)> owned(lp, [](DLManagedTensor* t) {
    if (t && t->deleter) t->deleter(t);
  });
  const DLTensor& t = lp->dl_tensor;
  if (t.ndim != 1 || t.shape[0] != static_cast<int64_t>(batch.tokens()) || t.dtype.code != kDLFloat || t.dtype.bits != 32)
    throw Error(AREAL_CODE_INTERNAL, std::string(what) + " returned a tensor that is not float32 [T]");
  const float* p = reinterpret_cast<const float*>(static_cast<const char*>(t.data) + t.byte_offset);
  return std::vector<float>(p, p + batch.tokens());
}

// The newest run_dir/checkpoints/step_N that holds host_state.json.
std::string newest_checkpoint(const std::string& run_dir, int64_t* step) {
  const fs::path root = fs::path(run_dir) / "checkpoints";
  std::string best;
  *step = -1;
  if (!fs::exists(root)) return best;
  for (const auto& e : fs::directory_iterator(root)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("step_", 0) != 0 || !fs::exists(e.path() / "host_state.json")) continue;
    const int64_t s = std::stoll(name.substr(5));
    if (s > *step) *step = s, best = e.path().string();
  }
  return best;
}

}  // namespace

double TrainSummary::first_mean(size_t window) const {
  const size_t n = std::min(window, step_rewards.size());
  return n == 0 ? 0.0 : std::accumulate(step_rewards.begin(), step_rewards.begin() + static_cast<std::ptrdiff_t>(n), 0.0) / static_cast<double>(n);
}

double TrainSummary::last_mean(size_t window) const {
  const size_t n = std::min(window, step_rewards.size());
  return n == 0 ? 0.0 : std::accumulate(step_rewards.end() - static_cast<std::ptrdiff_t>(n), step_rewards.end(), 0.0) / static_cast<double>(n);
}

TrainSummary run_trainer(const TrainerOptions& opt, const TrainerParts& parts, RolloutOptions rollout,
                         const EpisodeTarget& target) {
  auto log = logging::get("trainer");
  const auto run_start = Clock::now();
  fs::create_directories(opt.run_dir);
  const areal_train_vtable& train = *parts.train;
  const areal_algorithm_vtable& algo = *parts.algorithm;
  const areal_inference_vtable& inf = *parts.inference;

  // Resume: weights, optimizer and step from the newest checkpoint; the
  // inference backend serves those weights; staleness counts the consumed
  // batches as accepted so capacity does not jump.
  int64_t step = 0, version = 0;
  if (opt.resume) {
    int64_t ckpt_step = -1;
    const std::string dir = newest_checkpoint(opt.run_dir, &ckpt_step);
    if (dir.empty())
      throw Error(AREAL_CODE_NOT_FOUND, "trainer.resume is true but " + opt.run_dir + "/checkpoints has no checkpoint (step_N/host_state.json)");
    std::ifstream in(fs::path(dir) / "host_state.json");
    const json state = json::parse(in);
    step = state.at("step").get<int64_t>();
    version = state.at("version").get<int64_t>();
    rollout.first_task = state.at("next_task").get<int64_t>();
    call(train.load(parts.train_self, to_str(json_str({{"path", dir}, {"optimizer", true}}))), "train load");
    call(train.set_version(parts.train_self, version), "train set_version");
    call(inf.update_weights(parts.inference_self, to_str(json_str({{"type", "disk"}, {"path", dir}, {"version", version}}))),
         "inference update_weights");
    log->info("resumed from {} at step {} (version {}), rollout continues at task {}", dir, step, version, rollout.first_task);
  } else {
    call(train.get_version(parts.train_self, &version), "train get_version");
    call(inf.set_version(parts.inference_self, version), "inference set_version");
  }
  TrainingLog tlog(opt.run_dir, opt.total_steps, step);
  if (!opt.resume) fs::remove(rollout.records_path);  // a fresh run starts fresh records; a resumed one appends

  const size_t batch_groups = rollout.batch_size;
  RolloutController controller(std::move(rollout), target);
  if (opt.resume) controller.on_version_recovered(version);
  else controller.set_version(version);
  controller.start();

  const bool can_memory = train.export_weights != nullptr && inf.update_weights_from_tensors != nullptr;
  if (opt.weight_update == "memory" && !can_memory)
    throw Error(AREAL_CODE_UNSUPPORTED, "trainer.weight_update is memory, but the train plugin has no export_weights or the inference "
                                        "plugin no update_weights_from_tensors (ABI 1.1); use disk or auto");
  const bool in_memory = opt.weight_update == "memory" || (opt.weight_update == "auto" && can_memory);
  log->info("weight updates go {}", in_memory ? "in memory (train.export_weights -> inference.update_weights_from_tensors)"
                                               : "through HF files on disk (train.save -> inference.update_weights)");

  TrainSummary summary;
  std::string previous_weights;
  auto stop_and_rethrow = [&](const std::exception_ptr& e) {
    controller.resume();
    warn_if_status(inf.resume(parts.inference_self), "inference resume after an error");
    controller.stop();
    std::rethrow_exception(e);
  };
  try {
    for (; step < opt.total_steps; ++step) {
      const auto t_step = Clock::now();
      std::vector<RolloutGroup> groups = controller.take(batch_groups);
      const double t_wait = seconds_since(t_step);

      PackedBatch batch(version, opt.temperature);
      double reward_sum = 0, reward_sq = 0;
      size_t episodes = 0, unrewarded = 0;
      json sample_versions = json::array();
      int64_t staleness_max = 0;
      double staleness_sum = 0;
      for (const auto& g : groups) {
        for (double r : g.episode_rewards) reward_sum += r, reward_sq += r * r, ++episodes;
        unrewarded += g.unrewarded;
        for (const auto& r : g.rows) {
          const int64_t oldest = r.oldest_version();
          sample_versions.push_back(oldest);
          if (oldest >= 0) staleness_max = std::max(staleness_max, version - oldest), staleness_sum += static_cast<double>(version - oldest);
          batch.add(r, g.group_id);
        }
      }

      const auto t_train = Clock::now();
      if (opt.recompute_logprob)
        batch.prox_logprobs.values() = logprobs_of(train, parts.train_self, batch, opt.temperature, "train compute_logprobs");
      if (parts.ref != nullptr)
        batch.ref_logprobs.values() = logprobs_of(*parts.ref, parts.ref_self, batch, opt.temperature, "ref compute_logprobs");
      {
        TensorMapBuilder in = batch.map(), out;
        HostTensor<float> adv(std::vector<float>(batch.tokens(), 0.0f));
        out.add("advantages", adv.dl());
        call(algo.compute_advantages(parts.algorithm_self, in.get(), out.get()), "algorithm compute_advantages");
        batch.advantages = adv;
      }
      LossBridge bridge{&algo, parts.algorithm_self, {}, 0};
      areal_loss_fn loss{AREAL_OFFSET_OF_END(areal_loss_fn, eval), &bridge, &LossBridge::eval};
      StringCollector stats_text;
      {
        TensorMapBuilder m = batch.map();
        call(train.train_step(parts.train_self, m.get(), &loss, stats_text.writer()), "train train_step");
      }
      const json train_stats = json::parse(stats_text.text.empty() ? "{}" : stats_text.text);
      const double t_trained = seconds_since(t_train);

      // Weight update: nothing new starts and nothing generates while the
      // backend swaps weights; tokens after resume carry the new version.
      const auto t_update = Clock::now();
      const int64_t next_version = version + 1;
      controller.pause();
      call(inf.pause(parts.inference_self), "inference pause");
      call(train.set_version(parts.train_self, next_version), "train set_version");
      if (in_memory) {
        struct Target {
          const areal_inference_vtable* inf;
          void* self;
          int64_t version;
        } to{&inf, parts.inference_self, next_version};
        auto load = [](void* ctx, const areal_tensor_map* weights) -> areal_status* {
          auto* t = static_cast<Target*>(ctx);
          return t->inf->update_weights_from_tensors(t->self, weights, t->version);
        };
        call(train.export_weights(parts.train_self, load, &to), "weight update in memory");
      } else {
        const std::string weights = (fs::path(opt.run_dir) / "weights" / ("v" + std::to_string(next_version))).string();
        call(train.save(parts.train_self, to_str(json_str({{"path", weights}, {"optimizer", false}}))), "train save weights");
        call(inf.update_weights(parts.inference_self, to_str(json_str({{"type", "disk"}, {"path", weights}, {"version", next_version}}))),
             "inference update_weights");
        if (!previous_weights.empty()) fs::remove_all(previous_weights);
        previous_weights = weights;
      }
      version = next_version;
      controller.set_version(version);
      call(inf.resume(parts.inference_self), "inference resume");
      controller.resume();
      const double t_updated = seconds_since(t_update);

      if (opt.checkpoint_every > 0 && ((step + 1) % opt.checkpoint_every == 0 || step + 1 == opt.total_steps)) {
        const fs::path dir = fs::path(opt.run_dir) / "checkpoints" / ("step_" + std::to_string(step + 1));
        call(train.save(parts.train_self, to_str(json_str({{"path", dir.string()}, {"optimizer", true}}))), "train save checkpoint");
        std::ofstream(dir / "host_state.json")
            << json{{"step", step + 1}, {"version", version}, {"next_task", controller.next_untrained_task()}}.dump() << "\n";
        log->info("checkpoint {}", dir.string());
      }

      const double t_total = seconds_since(t_step);
      const double mean = episodes ? reward_sum / static_cast<double>(episodes) : 0.0;
      const RolloutStats rs = controller.stats();
      json row = {{"step", step + 1},
                  {"policy_version", version - 1},
                  {"reward_mean", mean},
                  {"reward_std", episodes ? std::sqrt(std::max(0.0, reward_sq / static_cast<double>(episodes) - mean * mean)) : 0.0},
                  {"episodes", episodes},
                  {"rows", batch.rows()},
                  {"tokens", batch.tokens()},
                  {"loss_tokens", batch.loss_tokens()},
                  {"unrewarded_completions", unrewarded},
                  {"sample_versions", sample_versions},
                  {"staleness_max", staleness_max},
                  {"staleness_mean", batch.rows() ? staleness_sum / static_cast<double>(batch.rows()) : 0.0},
                  {"groups_filtered_total", rs.groups_filtered},
                  {"groups_dropped_stale_total", rs.groups_dropped_stale},
                  {"groups_failed_total", rs.groups_failed},
                  {"episodes_failed_total", rs.episodes_failed},
                  {"seconds_rollout_wait", t_wait},
                  {"seconds_train", t_trained},
                  {"seconds_weight_update", t_updated},
                  {"weight_update", in_memory ? "memory" : "disk"},
                  {"seconds_step", t_total},
                  {"seconds_elapsed", seconds_since(run_start)},
                  {"samples_per_second", static_cast<double>(batch.rows()) / std::max(t_total, 1e-9)},
                  {"tokens_per_second", static_cast<double>(batch.tokens()) / std::max(t_total, 1e-9)}};
      for (const auto& [k, v] : train_stats.items()) row[k] = v;
      const json algo_stats = bridge.averages();  // named: items() must not outlive a temporary
      for (const auto& [k, v] : algo_stats.items()) row["algo_" + k] = v;
      tlog.step(row);
      summary.step_rewards.push_back(mean);
      ++summary.steps_run;
    }
  } catch (...) {
    stop_and_rethrow(std::current_exception());
  }
  controller.stop();
  if (opt.save_final) {
    const std::string final_dir = (fs::path(opt.run_dir) / "final").string();
    call(train.save(parts.train_self, to_str(json_str({{"path", final_dir}, {"optimizer", false}}))), "train save final");
    log->info("final model (Hugging Face format) in {}; serve it with: areal-host serve --model {}", final_dir, final_dir);
  }
  if (!previous_weights.empty()) fs::remove_all(previous_weights);
  std::error_code ec;
  fs::remove(fs::path(opt.run_dir) / "weights", ec);  // only if empty
  tlog.write_reward_curve();
  summary.final_version = version;
  summary.seconds = seconds_since(run_start);
  return summary;
}

}  // namespace areal::trainer
