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
#include "core/telemetry/metrics.hpp"
#include "core/plugin_host/string_writer.hpp"
#include "core/trainer/optimizer_step.hpp"
#include "core/trainer/training_log.hpp"

namespace areal::trainer {

namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::string json_str(const json& j) { return j.dump(); }
areal_str to_str(const std::string& s) { return areal_str{s.data(), s.size()}; }

void call(areal_status* st, const char* what) { throw_if_status(st, what); }

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

// A fresh run (trainer.resume false) in a folder an earlier run used: its
// checkpoints would be taken for this run's by a later resume (the newest
// step wins, whichever run wrote it), and a step folder this run saves into
// would mix both runs' files. They are kept, not deleted, as the gateway's
// state is (gateway_state.previous).
void set_aside_previous_checkpoints(const std::string& run_dir) {
  const fs::path root = fs::path(run_dir) / "checkpoints";
  std::error_code ec;
  if (!fs::exists(root, ec) || fs::is_empty(root, ec)) return;
  const fs::path previous = root.string() + ".previous";
  fs::remove_all(previous, ec);
  fs::rename(root, previous, ec);
  if (ec) throw Error(AREAL_CODE_FAILED_PRECONDITION, "cannot move the previous run's checkpoints " + root.string() + " aside: " + ec.message());
  logging::get("trainer")->warn("trainer.resume is false: the previous run's checkpoints moved to {} (set trainer.resume=true to continue that run)",
                                previous.string());
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

namespace {

// --- The named steps of one run ----------------------------------------------

// How trained weights reach the inference backend after each step.
enum class WeightSync {
  kAdapter,  // the LoRA adapter alone: train.export_adapter -> inference.load_adapter (ABI 1.6)
  kMemory,   // the whole model: train.export_weights -> inference.update_weights_from_tensors (ABI 1.1)
  kDisk,     // HF files: train.save -> inference.update_weights
};
const char* weight_sync_name(WeightSync s) { return s == WeightSync::kAdapter ? "adapter" : s == WeightSync::kMemory ? "memory" : "disk"; }

// Whether the train plugin trains a LoRA adapter (it exports one; NOT_FOUND:
// it trains every weight).
bool trains_adapter(const TrainerParts& parts) {
  const areal_train_vtable& train = *parts.train;
  if (train.struct_size < AREAL_OFFSET_OF_END(areal_train_vtable, export_adapter) || train.export_adapter == nullptr) return false;
  auto none = [](void*, areal_str, const areal_tensor_map*) -> areal_status* { return nullptr; };
  StatusPtr st(train.export_adapter(parts.train_self, none, nullptr));
  if (st && status_code(st.get()) == AREAL_CODE_NOT_FOUND) return false;
  if (st) throw Error(status_code(st.get()), "train export_adapter: " + std::string(status_message(st.get())));
  return true;
}

bool serves_adapters(const areal_inference_vtable& inf) {
  return inf.struct_size >= AREAL_OFFSET_OF_END(areal_inference_vtable, unload_adapter) && inf.load_adapter != nullptr;
}

// Chooses how weights reach the inference backend (trainer.weight_update).
WeightSync choose_weight_sync(const TrainerOptions& opt, const TrainerParts& parts) {
  if (opt.shared_engine && !(serves_adapters(*parts.inference) && trains_adapter(parts)))
    throw Error(AREAL_CODE_UNSUPPORTED, "a job on a shared inference engine trains a LoRA adapter (train.lora) and the engine must serve adapters "
                                        "(ABI 1.6 load_adapter): other jobs' requests use the same base weights");
  const bool can_memory = parts.train->export_weights != nullptr && parts.inference->update_weights_from_tensors != nullptr;
  const bool can_adapter = serves_adapters(*parts.inference) && trains_adapter(parts);
  if (opt.weight_update == "memory" && !can_memory)
    throw Error(AREAL_CODE_UNSUPPORTED, "trainer.weight_update is memory, but the train plugin has no export_weights or the inference "
                                        "plugin no update_weights_from_tensors (ABI 1.1); use disk or auto");
  if (opt.weight_update == "adapter" && !can_adapter)
    throw Error(AREAL_CODE_UNSUPPORTED, "trainer.weight_update is adapter, but the train plugin trains no LoRA adapter (set train.lora) "
                                        "or the inference plugin serves no adapters (ABI 1.6 load_adapter); use memory, disk or auto");
  WeightSync s = WeightSync::kDisk;
  if (opt.shared_engine || opt.weight_update == "adapter" || (opt.weight_update == "auto" && can_adapter)) s = WeightSync::kAdapter;
  else if (opt.weight_update == "memory" || (opt.weight_update == "auto" && can_memory)) s = WeightSync::kMemory;
  logging::get("trainer")->info("weight updates go {}",
                                s == WeightSync::kAdapter ? "as the LoRA adapter alone (train.export_adapter -> inference.load_adapter '" +
                                                                opt.policy_adapter + "', the base weights stay)"
                                : s == WeightSync::kMemory ? std::string("in memory (train.export_weights -> inference.update_weights_from_tensors)")
                                                           : std::string("through HF files on disk (train.save -> inference.update_weights)"));
  return s;
}

areal_status* check_weights_device(const areal_inference_vtable& inf, void* self, const areal_tensor_map& weights);

// The bytes of a tensor map's data (what a weight update moves).
size_t tensor_bytes(const areal_tensor_map& m) {
  size_t total = 0;
  for (size_t i = 0; i < m.count; ++i) {
    const DLTensor& d = *m.tensors[i];
    size_t n = d.dtype.bits / 8u * d.dtype.lanes;
    for (int32_t k = 0; k < d.ndim; ++k) n *= static_cast<size_t>(d.shape[k]);
    total += n;
  }
  return total;
}

// Hands the trained adapter to the engine as opt.policy_adapter at
// `version` (its default adapter unless the engine is shared); returns the
// bytes handed over.
size_t hand_off_adapter(const TrainerOptions& opt, const TrainerParts& parts, int64_t version) {
  struct Target {
    const TrainerParts* parts;
    const TrainerOptions* opt;
    int64_t version;
    size_t bytes = 0;
  } to{&parts, &opt, version};
  auto load = [](void* ctx, areal_str config, const areal_tensor_map* tensors) -> areal_status* {
    auto* t = static_cast<Target*>(ctx);
    if (areal_status* refused = check_weights_device(*t->parts->inference, t->parts->inference_self, *tensors)) return refused;
    t->bytes = tensor_bytes(*tensors);
    const json cfg = json::parse(std::string(config.data, config.size), nullptr, false);
    if (!cfg.is_object()) return make_status(AREAL_CODE_INTERNAL, "train export_adapter gave a config that is not a JSON object");
    const std::string spec =
        json_str({{"name", t->opt->policy_adapter}, {"version", t->version}, {"default", !t->opt->shared_engine}, {"config", cfg}});
    return t->parts->inference->load_adapter(t->parts->inference_self, to_str(spec), tensors);
  };
  call(parts.train->export_adapter(parts.train_self, load, &to), "adapter hand-off");
  return to.bytes;
}

// Resume: weights, optimizer and step from the newest checkpoint, and the
// inference backend serves those weights (with adapter hand-offs: its base
// stays, and the checkpoint's adapter becomes its default); else the train
// plugin's version becomes the backend's (and its adapter, if it trains one,
// the default adapter from the start). Returns {step, version}; sets where
// rollout resumes.
std::pair<int64_t, int64_t> resume_or_start(const TrainerOptions& opt, const TrainerParts& parts, WeightSync sync, RolloutOptions& rollout) {
  const areal_train_vtable& train = *parts.train;
  const areal_inference_vtable& inf = *parts.inference;
  int64_t version = 0;
  if (!opt.resume) {
    call(train.get_version(parts.train_self, &version), "train get_version");
    if (!opt.shared_engine) call(inf.set_version(parts.inference_self, version), "inference set_version");
    if (sync == WeightSync::kAdapter) hand_off_adapter(opt, parts, version);  // e.g. a lora_path the run starts from
    fs::remove(rollout.records_path);  // a fresh run starts fresh records; a resumed one appends
    set_aside_previous_checkpoints(opt.run_dir);
    return {0, version};
  }
  int64_t ckpt_step = -1;
  const std::string dir = newest_checkpoint(opt.run_dir, &ckpt_step);
  if (dir.empty())
    throw Error(AREAL_CODE_NOT_FOUND, "trainer.resume is true but " + opt.run_dir + "/checkpoints has no checkpoint (step_N/host_state.json)");
  std::ifstream in(fs::path(dir) / "host_state.json");
  const json state = json::parse(in);
  const int64_t step = state.at("step").get<int64_t>();
  version = state.at("version").get<int64_t>();
  rollout.first_task = state.at("next_task").get<int64_t>();
  // The gateway forgets the sessions this checkpoint trained (if the run died
  // before it could) and hands out again those trained after it.
  if (rollout.online && rollout.gateway != nullptr) rollout.gateway->commit_checkpoint(step);
  call(train.load(parts.train_self, to_str(json_str({{"path", dir}, {"optimizer", true}}))), "train load");
  call(train.set_version(parts.train_self, version), "train set_version");
  if (sync == WeightSync::kAdapter) {
    if (!opt.shared_engine) call(inf.set_version(parts.inference_self, version), "inference set_version");
    hand_off_adapter(opt, parts, version);
  } else {
    call(inf.update_weights(parts.inference_self, to_str(json_str({{"type", "disk"}, {"path", dir}, {"version", version}}))),
         "inference update_weights");
  }
  logging::get("trainer")->info("resumed from {} at step {} (version {}), rollout continues at task {}", dir, step, version,
                                rollout.first_task);
  return {step, version};
}

// What a step's groups say about rewards and staleness (the metrics row's inputs).
struct BatchStats {
  double reward_sum = 0, reward_sq = 0;
  size_t episodes = 0, unrewarded = 0;
  json sample_versions = json::array();
  json session_ids = json::array();  // online: the gateway sessions trained,
  json tasks = json::array();        // and their rollout tasks (rollouts.jsonl's "task"; unique in a process, as ids may not be)
  int64_t staleness_max = 0;
  double staleness_sum = 0;
  double reward_mean() const { return episodes ? reward_sum / static_cast<double>(episodes) : 0.0; }
};

// The groups' rows packed for the plugins, with their stats. Rows go in the
// order of their tokens, so rows sharing a prefix are neighbours whichever
// order their sessions ended in (a group's samples, a session's turns): the
// train plugin's micro-batches and the split over train ranks then keep
// them together and compute the prefix once (train.prefix_sharing). Groups
// are found by group_ids, never by position, so the order is free.
void make_batch(const std::vector<RolloutGroup>& groups, int64_t version, PackedBatch& batch, BatchStats& stats) {
  std::vector<std::pair<const TrajectoryRow*, int64_t>> rows;
  for (const auto& g : groups) {
    for (double r : g.episode_rewards) stats.reward_sum += r, stats.reward_sq += r * r, ++stats.episodes;
    stats.unrewarded += g.unrewarded;
    if (!g.session_id.empty()) stats.session_ids.push_back(g.session_id), stats.tasks.push_back(g.task);
    for (const auto& r : g.rows) rows.emplace_back(&r, g.group_id);
  }
  std::stable_sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.first->input_ids < b.first->input_ids; });
  for (const auto& [r, group_id] : rows) {
    const int64_t oldest = r->oldest_version();
    stats.sample_versions.push_back(oldest);
    if (oldest >= 0) {
      stats.staleness_max = std::max(stats.staleness_max, version - oldest);
      stats.staleness_sum += static_cast<double>(version - oldest);
    }
    batch.add(*r, group_id);
  }
}

// The inference engine's peak device memory and prefix-cache hit rate (the
// share of prompt tokens so far taken from its cache), when its info reports
// them (the local engine does; remote servers report their own elsewhere).
void add_inference_info(const TrainerParts& parts, json& row) {
  StringCollector info;
  if (areal_status* st = parts.inference->info(parts.inference_self, info.writer())) {
    warn_if_status(st, "inference info");
    return;
  }
  const json j = json::parse(info.text.empty() ? "{}" : info.text, nullptr, false);
  if (j.is_object() && j.contains("peak_device_memory_bytes") && j["peak_device_memory_bytes"].is_number())
    row["inference_peak_device_memory_bytes"] = j["peak_device_memory_bytes"];
  if (j.is_object() && j.contains("prefix_cache") && j["prefix_cache"].is_object() && j["prefix_cache"].value("enabled", false))
    row["inference_prefix_cache_hit_rate"] = j["prefix_cache"].value("hit_rate", 0.0);
}

// Device memory goes only to an inference plugin whose info names a CUDA
// device (the ABI's rule; a CPU-only receiver would read it as host memory).
areal_status* check_weights_device(const areal_inference_vtable& inf, void* self, const areal_tensor_map& weights) {
  bool on_device = false;
  for (size_t i = 0; i < weights.count; ++i) on_device = on_device || weights.tensors[i]->device.device_type != kDLCPU;
  if (!on_device) return nullptr;
  StringCollector info;
  if (areal_status* st = inf.info(self, info.writer())) return st;
  const json j = json::parse(info.text.empty() ? "{}" : info.text, nullptr, false);
  const std::string device = j.is_object() && j.contains("device") && j["device"].is_string() ? j["device"].get<std::string>() : "";
  if (device.rfind("cuda", 0) == 0) return nullptr;
  return make_status(AREAL_CODE_UNSUPPORTED, "the train plugin exports its weights in GPU memory, but the inference plugin computes on '" +
                                                 (device.empty() ? std::string("an unnamed device") : device) +
                                                 "': set trainer.weight_update: disk, or put both on the GPU");
}

// Hands the trained weights to the inference backend as `next_version`.
// The caller has paused rollout and inference. Disk updates keep one
// weights folder at a time (*previous_weights).
size_t sync_weights(const TrainerOptions& opt, const TrainerParts& parts, WeightSync sync, int64_t next_version,
                    std::string* previous_weights) {
  const areal_train_vtable& train = *parts.train;
  const areal_inference_vtable& inf = *parts.inference;
  call(train.set_version(parts.train_self, next_version), "train set_version");
  if (sync == WeightSync::kAdapter) return hand_off_adapter(opt, parts, next_version);
  if (sync == WeightSync::kMemory) {
    struct Target {
      const areal_inference_vtable* inf;
      void* self;
      int64_t version;
      size_t bytes = 0;
    } to{&inf, parts.inference_self, next_version};
    auto load = [](void* ctx, const areal_tensor_map* weights) -> areal_status* {
      auto* t = static_cast<Target*>(ctx);
      if (areal_status* refused = check_weights_device(*t->inf, t->self, *weights)) return refused;
      t->bytes = tensor_bytes(*weights);
      return t->inf->update_weights_from_tensors(t->self, weights, t->version);
    };
    call(train.export_weights(parts.train_self, load, &to), "weight update in memory");
    return to.bytes;
  }
  const std::string weights = (fs::path(opt.run_dir) / "weights" / ("v" + std::to_string(next_version))).string();
  call(train.save(parts.train_self, to_str(json_str({{"path", weights}, {"optimizer", false}}))), "train save weights");
  call(inf.update_weights(parts.inference_self, to_str(json_str({{"type", "disk"}, {"path", weights}, {"version", next_version}}))),
       "inference update_weights");
  if (!previous_weights->empty()) fs::remove_all(*previous_weights);
  *previous_weights = weights;
  return 0;  // on disk: the files' size is the backend's business
}

// Weights, optimizer and loop state, when due after `steps_done` steps.
void checkpoint_if_due(const TrainerOptions& opt, const TrainerParts& parts, int64_t steps_done, int64_t version,
                       RolloutController& controller) {
  if (opt.checkpoint_every <= 0) {
    // No checkpoint to resume from: the sessions trained so far never come back.
    if (controller.mark_settled_sessions(steps_done)) controller.commit_checkpoint(steps_done);
    return;
  }
  if (steps_done % opt.checkpoint_every != 0 && steps_done != opt.total_steps) return;
  // First the gateway records which sessions these steps trained: a
  // checkpoint it cannot tie to its sessions is not written (a resume from
  // it could train them twice); the next one will be.
  if (!controller.mark_settled_sessions(steps_done)) {
    logging::get("trainer")->error("checkpoint at step {} skipped: the gateway could not record its sessions", steps_done);
    return;
  }
  const fs::path dir = fs::path(opt.run_dir) / "checkpoints" / ("step_" + std::to_string(steps_done));
  fs::remove(dir / "host_state.json");  // a folder saved into again counts only once this save is whole
  call(parts.train->save(parts.train_self, to_str(json_str({{"path", dir.string()}, {"optimizer", true}}))), "train save checkpoint");
  // Written last and renamed into place: a checkpoint counts only once whole (a kill mid-save leaves none).
  {
    std::ofstream out(dir / "host_state.json.tmp");
    out << json{{"step", steps_done}, {"version", version}, {"next_task", controller.next_untrained_task()}}.dump() << "\n";
    out.flush();
    if (!out) throw Error(AREAL_CODE_UNAVAILABLE, "cannot write " + (dir / "host_state.json.tmp").string());
  }
  fs::rename(dir / "host_state.json.tmp", dir / "host_state.json");
  logging::get("trainer")->info("checkpoint {}", dir.string());
  controller.commit_checkpoint(steps_done);  // the gateway forgets the sessions it holds
}

struct StepTimes {
  double wait = 0, train = 0, update = 0, total = 0, elapsed = 0;
  size_t update_bytes = 0;  // what the weight update moved (0 on disk)
};

// The step's row of metrics.jsonl (docs/algorithms.md lists every key).
json metrics_row(int64_t steps_done, int64_t trained_version, const BatchStats& b, const PackedBatch& batch, const RolloutStats& rs,
                 const StepTimes& t, WeightSync sync, const json& step_stats) {
  const double mean = b.reward_mean();
  json row = {{"step", steps_done},
              {"policy_version", trained_version},
              {"reward_mean", mean},
              {"reward_std", b.episodes ? std::sqrt(std::max(0.0, b.reward_sq / static_cast<double>(b.episodes) - mean * mean)) : 0.0},
              {"episodes", b.episodes},
              {"rows", batch.rows()},
              {"tokens", batch.tokens()},
              {"loss_tokens", batch.loss_tokens()},
              {"unrewarded_completions", b.unrewarded},
              {"sample_versions", b.sample_versions},
              {"staleness_max", b.staleness_max},
              {"staleness_mean", batch.rows() ? b.staleness_sum / static_cast<double>(batch.rows()) : 0.0},
              {"groups_filtered_total", rs.groups_filtered},
              {"groups_dropped_stale_total", rs.groups_dropped_stale},
              {"groups_failed_total", rs.groups_failed},
              {"rollouts_in_flight", rs.tasks_started - rs.tasks_finished},
              {"episodes_failed_total", rs.episodes_failed},
              {"seconds_rollout_wait", t.wait},
              {"seconds_train", t.train},
              {"seconds_weight_update", t.update},
              {"weight_update", weight_sync_name(sync)},
              {"weight_update_bytes", t.update_bytes},
              {"seconds_step", t.total},
              {"seconds_elapsed", t.elapsed},
              {"samples_per_second", static_cast<double>(batch.rows()) / std::max(t.total, 1e-9)},
              {"tokens_per_second", static_cast<double>(batch.tokens()) / std::max(t.total, 1e-9)}};
  if (!b.session_ids.empty()) row["session_ids"] = b.session_ids, row["tasks"] = b.tasks;
  // The loop's own keys win: a train plugin's "step" counts its optimizer
  // updates (ppo_n_minibatches of them a step), not the loop's steps.
  for (const auto& [k, v] : step_stats.items())
    if (!row.contains(k)) row[k] = v;
  return row;
}

// The final HF model folder and the cleanup of transient weights.
void finish_run(const TrainerOptions& opt, const TrainerParts& parts, const std::string& previous_weights) {
  if (opt.save_final) {
    const std::string final_dir = (fs::path(opt.run_dir) / "final").string();
    call(parts.train->save(parts.train_self, to_str(json_str({{"path", final_dir}, {"optimizer", false}}))), "train save final");
    logging::get("trainer")->info("final model (Hugging Face format) in {}; serve it with: areal-host serve --model {}", final_dir, final_dir);
  }
  if (!previous_weights.empty()) fs::remove_all(previous_weights);
  std::error_code ec;
  fs::remove(fs::path(opt.run_dir) / "weights", ec);  // only if empty
}

}  // namespace

TrainSummary run_trainer(const TrainerOptions& opt, const TrainerParts& parts, RolloutOptions rollout,
                         const EpisodeTarget& target) {
  const auto run_start = Clock::now();
  fs::create_directories(opt.run_dir);
  const areal_inference_vtable& inf = *parts.inference;

  const WeightSync sync = choose_weight_sync(opt, parts);  // before resuming: an adapter run resumes its adapter, not its base
  auto [step, version] = resume_or_start(opt, parts, sync, rollout);
  TrainingLog tlog(opt.run_dir, opt.total_steps, step);
  const size_t batch_groups = rollout.batch_size;
  RolloutController controller(std::move(rollout), target);
  // Resumed: staleness counts the consumed batches as accepted so capacity does not jump.
  if (opt.resume) controller.on_version_recovered(version);
  else controller.set_version(version);
  controller.start();

  TrainSummary summary;
  std::string previous_weights;
  try {
    for (; step < opt.total_steps; ++step) {
      if (opt.stop_requested)
        if (std::string why = opt.stop_requested(); !why.empty()) throw Error(AREAL_CODE_CANCELLED, why);
      StepTimes t;
      const auto t_step = Clock::now();
      const std::vector<RolloutGroup> groups = controller.take(batch_groups);
      t.wait = seconds_since(t_step);

      PackedBatch batch(version, opt.temperature);
      BatchStats stats;
      make_batch(groups, version, batch, stats);
      const auto t_train = Clock::now();
      const json step_stats = optimizer_step(parts, batch, {opt.temperature, opt.recompute_logprob, opt.ppo_n_minibatches, opt.train_world_size,
                                                                         opt.total_steps * opt.ppo_n_minibatches});
      t.train = seconds_since(t_train);

      // Nothing new starts and nothing generates while the backend swaps
      // weights; tokens after resume carry the new version.
      const auto t_update = Clock::now();
      // A shared engine keeps serving the other jobs: the adapter swap
      // happens between its decoding steps (load_adapter), no pause needed.
      controller.pause();
      if (!opt.shared_engine) call(inf.pause(parts.inference_self), "inference pause");
      t.update_bytes = sync_weights(opt, parts, sync, version + 1, &previous_weights);
      ++version;
      controller.set_version(version);
      if (!opt.shared_engine) call(inf.resume(parts.inference_self), "inference resume");
      controller.resume();
      t.update = seconds_since(t_update);

      checkpoint_if_due(opt, parts, step + 1, version, controller);
      t.total = seconds_since(t_step);
      t.elapsed = seconds_since(run_start);
      json row = metrics_row(step + 1, version - 1, stats, batch, controller.stats(), t, sync, step_stats);
      add_inference_info(parts, row);
      tlog.step(row);
      summary.step_rewards.push_back(stats.reward_mean());
      ++summary.steps_run;
      Metrics& m = Metrics::global();
      m.set("areal_trainer_step", static_cast<double>(step + 1));
      m.set("areal_trainer_policy_version", static_cast<double>(version));
      m.set("areal_trainer_reward_mean", stats.reward_mean());
      // Peak device memory of the engines (CUDA allocator peak; the process's peak RSS on CPU).
      if (row.contains("peak_device_memory_bytes") && row["peak_device_memory_bytes"].is_number())
        m.set("areal_train_peak_device_memory_bytes", row["peak_device_memory_bytes"].get<double>());
      if (row.contains("inference_peak_device_memory_bytes"))
        m.set("areal_inference_peak_device_memory_bytes", row["inference_peak_device_memory_bytes"].get<double>());
      if (opt.after_step)
        for (auto& row : opt.after_step(step + 1, version, step + 1 == opt.total_steps)) {
          tlog.eval(row);
          summary.evaluations.push_back(std::move(row));
        }
    }
  } catch (...) {
    controller.resume();
    if (!opt.shared_engine) warn_if_status(inf.resume(parts.inference_self), "inference resume after an error");
    controller.stop();
    throw;
  }
  controller.stop();
  finish_run(opt, parts, previous_weights);
  tlog.write_reward_curve();
  summary.final_version = version;
  summary.seconds = seconds_since(run_start);
  return summary;
}

}  // namespace areal::trainer
