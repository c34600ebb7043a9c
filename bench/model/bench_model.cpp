// Training and generation throughput of areal's libtorch engines, through
// the plugin ABI exactly as areal-host drives them (bench/model/run.sh
// runs it next to the python3-torch reference, reference_model.py).
//   areal_model_bench MODEL_DIR THREADS BATCH SEQLEN STEPS GEN_REQUESTS GEN_PROMPT GEN_TOKENS
// Prints one JSON object: train tokens/s (forward+backward+AdamW), the
// first step's loss (the reference must match it), generation tokens/s
// (timed after a warm-up run of the same length). STEPS 0 skips training,
// GEN_REQUESTS 0 generation; AREAL_BENCH_TRAIN adds train-engine keys.
// With AREAL_BENCH_CONSISTENCY set, the trainer (fsdp) also scores the
// generated tokens: max and mean |engine log-prob - trainer log-prob|.
// AREAL_BENCH_ENGINE, a JSON object, adds to both engines' configs (e.g.
// {"device": "cuda", "dtype": "bfloat16"}; scripts/gpu_check.sh sets it).
// AREAL_BENCH_PROFILE=DIR: after the timed runs, one more training step and
// one more generation run, each recorded by the Kineto profiler
// (bench/gpu/profiler_hooks.cpp, a module built on CUDA builds) into
// DIR/train_trace.json and DIR/generate_trace.json.
// AREAL_BENCH_TOP_P=P: generation samples with top_p P (default 1: the whole
// vocabulary at temperature 1).
#include <dlfcn.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <cstdint>
#include <string>
#include <vector>
#include <memory>
#include <stdexcept>
#include <exception>

#include <nlohmann/json.hpp>

#include "core/plugin_host/error.hpp"
#include "core/plugin_host/generation.hpp"
#include "core/plugin_host/host_tensor.hpp"
#include "core/plugin_host/plugin_catalog.hpp"
#include "core/plugin_host/plugin_instance.hpp"
#include "core/plugin_host/string_writer.hpp"
#include "mean_nll_loss.hpp"
#include "core/plugin_host/process_heap.hpp"

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// AREAL_BENCH_PROFILE: the profiler module's two entry points, when it loads.
class Profiler {
 public:
  Profiler() {
    const char* dir = std::getenv("AREAL_BENCH_PROFILE");
    if (dir == nullptr || *dir == 0) return;
    void* module = dlopen(AREAL_BENCH_PROFILER_MODULE, RTLD_NOW);
    if (module == nullptr) {
      std::cerr << "AREAL_BENCH_PROFILE: no profiler module (" << dlerror() << "): no traces\n";
      return;
    }
    begin_ = reinterpret_cast<int (*)()>(dlsym(module, "areal_profile_begin"));
    end_ = reinterpret_cast<int (*)(const char*)>(dlsym(module, "areal_profile_end"));
    dir_ = dir;
  }
  // Runs f recorded into DIR/name, when profiling is on.
  template <class F>
  void record(const std::string& name, F f) {
    if (begin_ == nullptr || end_ == nullptr || begin_() != 0) return;
    f();
    const std::string path = dir_ + "/" + name;
    if (end_(path.c_str()) == 0) std::cerr << "AREAL_BENCH_PROFILE: wrote " << path << "\n";
  }

 private:
  int (*begin_)() = nullptr;
  int (*end_)(const char*) = nullptr;
  std::string dir_;
};

// The benchmark's token ids; reference_model.py uses the same formula.
int32_t token(int64_t seq, int64_t pos, int64_t vocab) { return static_cast<int32_t>((seq * 7919 + pos * 104729 + 13) % vocab); }

}  // namespace

int main(int argc, char** argv) {
  if (argc != 9) {
    std::cerr << "usage: areal_model_bench MODEL_DIR THREADS BATCH SEQLEN STEPS GEN_REQUESTS GEN_PROMPT GEN_TOKENS\n";
    return 2;
  }
  areal::keep_tensor_buffers_on_heap();
  try {
    const std::string model = argv[1];
    const int threads = std::stoi(argv[2]), batch = std::stoi(argv[3]), seqlen = std::stoi(argv[4]), steps = std::stoi(argv[5]);
    const int gen_requests = std::stoi(argv[6]), gen_prompt = std::stoi(argv[7]), gen_tokens = std::stoi(argv[8]);
    areal::PluginCatalog catalog({AREAL_BENCH_PLUGIN_DIR});
    std::string name = "bench";
    auto services = areal::make_services(name);
    nlohmann::json out{{"impl", "areal"}, {"threads", threads}};
    const char* extra_env = std::getenv("AREAL_BENCH_ENGINE");
    const nlohmann::json extra = extra_env && *extra_env ? nlohmann::json::parse(extra_env) : nlohmann::json::object();
    auto with_extra = [&](nlohmann::json c) {
      for (const auto& [k, v] : extra.items()) c[k] = v;
      return c.dump();
    };
    // AREAL_BENCH_TRAIN: more keys for the train engine only (e.g. {"lora": {...}}: bench/model/lora.sh).
    const char* train_env = std::getenv("AREAL_BENCH_TRAIN");
    const nlohmann::json train_extra = train_env && *train_env ? nlohmann::json::parse(train_env) : nlohmann::json::object();
    auto with_train_extra = [&](nlohmann::json c) {
      for (const auto& [k, v] : train_extra.items()) c[k] = v;
      return with_extra(std::move(c));
    };
    const int64_t vocab = nlohmann::json::parse(std::ifstream(model + "/config.json"))["vocab_size"];
    Profiler profiler;

    if (steps > 0) {  // Training: one warm-up step, then `steps` timed steps on the same batch (STEPS 0: generation only).
      auto fsdp = catalog.resolve("fsdp", AREAL_KIND_TRAIN);
      areal::PluginInstance engine(fsdp, with_train_extra({{"model_path", model}, {"lr", 1e-5}, {"threads", threads}, {"micro_batch_tokens", batch * seqlen}}),
                                   &services);
      // AREAL_BENCH_RAGGED=1: an RL-like ragged batch, row s seqlen * (s % 4 + 1) / 4
      // tokens long (bench/gpu/hf_reference.py's formula), packed without padding.
      const bool ragged = std::getenv("AREAL_BENCH_RAGGED") && std::string(std::getenv("AREAL_BENCH_RAGGED")) == "1";
      std::vector<int32_t> ids, cu{0}, mask;
      for (int s = 0; s < batch; ++s) {
        const int len = ragged ? std::max(2, seqlen * (s % 4 + 1) / 4) : seqlen;
        for (int t = 0; t < len; ++t) ids.push_back(token(s, t, vocab)), mask.push_back(t > 0);
        cu.push_back(static_cast<int32_t>(ids.size()));
      }
      areal::HostTensor<int32_t> ids_t(ids), cu_t(cu), mask_t(mask);
      areal_loss_fn loss = areal::testing::mean_nll_loss();
      auto step = [&] {
        areal::TensorMapBuilder b;
        b.add("input_ids", ids_t.dl()).add("cu_seqlens", cu_t.dl()).add("loss_mask", mask_t.dl());
        areal::StringCollector stats;
        areal::throw_if_status(fsdp->train()->train_step(engine.self(), b.get(), &loss, stats.writer()), "train_step");
        const auto j = nlohmann::json::parse(stats.text);
        for (const char* k : {"device", "dtype", "peak_device_memory_bytes", "resident_state_bytes"})
          if (j.contains(k)) out["train_" + std::string(k)] = j[k];
        if (!out.contains("first_grad_norm")) out["first_grad_norm"] = j.value("grad_norm", 0.0);  // before clipping: the gradient's check
        return j["loss"].get<double>();
      };
      // On a GPU train_step returns with its optimizer step still queued (its
      // last wait is the gradient norm): a two-token recompute after the timed
      // steps reads a result back, so the clock stops once the device is done.
      // Its own cost counts against areal.
      areal::HostTensor<int32_t> drain_ids(std::vector<int32_t>{ids[0], ids[1]}), drain_cu(std::vector<int32_t>{0, 2});
      auto drain = [&] {
        areal::TensorMapBuilder b;
        b.add("input_ids", drain_ids.dl()).add("cu_seqlens", drain_cu.dl());
        DLManagedTensor* lp = nullptr;
        areal::throw_if_status(fsdp->train()->compute_logprobs(engine.self(), b.get(), 1.0f, &lp), "compute_logprobs");
        lp->deleter(lp);
      };
      out["first_loss"] = step();
      drain();
      const auto t0 = Clock::now();
      for (int i = 0; i < steps; ++i) out["last_loss"] = step();  // after the updates: the gradients' direction's check
      drain();
      const double secs = seconds_since(t0);
      out["train_tokens_per_s"] = static_cast<double>(steps) * static_cast<double>(ids.size()) / secs;
      out["train_tokens"] = ids.size();
      out["train_step_s"] = secs / steps;
      profiler.record("train_trace.json", step);
    }
    if (gen_requests > 0) {  // Generation: all requests at once, batched by the engine; ignore_eos (GEN_REQUESTS 0 skips it).
      auto local = catalog.resolve("local", AREAL_KIND_INFERENCE);
      areal::PluginInstance engine(local, with_extra({{"model_path", model}, {"threads", threads}, {"max_batch", gen_requests}}), &services);
      std::vector<std::vector<int32_t>> prompts(gen_requests);
      for (int r = 0; r < gen_requests; ++r)
        for (int t = 0; t < gen_prompt; ++t) prompts[r].push_back(token(r, t, vocab));
      std::vector<areal::GenerationResult> results;
      const char* top_p_env = std::getenv("AREAL_BENCH_TOP_P");
      const float top_p = top_p_env && *top_p_env ? std::stof(top_p_env) : 1.0f;
      out["gen_top_p"] = top_p;
      auto run = [&](int tokens) {
        std::vector<std::unique_ptr<areal::CollectingSink>> sinks;
        for (int r = 0; r < gen_requests; ++r) {
          areal_sampling_params s{};
          s.struct_size = AREAL_OFFSET_OF_END(areal_sampling_params, stop_strings_count);
          s.temperature = 1.0f;
          s.top_p = top_p;
          s.max_new_tokens = tokens;
          s.seed = static_cast<uint64_t>(r);
          s.has_seed = 1;
          s.ignore_eos = 1;
          areal_gen_request req{AREAL_OFFSET_OF_END(areal_gen_request, sampling), areal::next_request_id(), {nullptr, 0},
                                prompts[r].data(), prompts[r].size(), &s};
          sinks.push_back(std::make_unique<areal::CollectingSink>());
          areal::throw_if_status(local->inference()->submit(engine.self(), &req, sinks.back()->sink()), "submit");
        }
        size_t produced = 0;
        results.clear();
        for (auto& sink : sinks) {
          if (!sink->wait(std::chrono::minutes(10))) throw std::runtime_error("generation timed out");
          results.push_back(sink->result());
          produced += results.back().output_ids.size();
        }
        return produced;
      };
      run(gen_tokens);  // warm-up on the full length (every shape the timed run meets, graphs captured)
      const auto t0 = Clock::now();
      const size_t produced = run(gen_tokens);
      const double secs = seconds_since(t0);
      out["gen_tokens_per_s"] = static_cast<double>(produced) / secs;
      out["gen_s"] = secs;
      areal::StringCollector info;
      areal::throw_if_status(local->inference()->info(engine.self(), info.writer()), "info");
      const auto j = nlohmann::json::parse(info.text);
      out["gen_peak_device_memory_bytes"] = j.value("peak_device_memory_bytes", 0.0);
      out["gen_cuda_graphs"] = j.value("cuda_graphs", false);
      out["gen_overlap"] = j.value("overlap", false);
      out["gen_fused_kernels"] = j.value("fused_kernels", nlohmann::json::object());
      out["gen_decode_steps"] = j.value("decode_steps", 0);
      out["gen_decode_kernels"] = j.value("decode_kernels", false);
      if (const char* c = std::getenv("AREAL_BENCH_CONSISTENCY"); c && *c) {  // set and not empty (gpu_check passes "" for the other runs)
        // The same tokens scored by the trainer (fsdp, same dtype and device):
        // how far its recompute is from what the engine recorded.
        auto fsdp = catalog.resolve("fsdp", AREAL_KIND_TRAIN);
        areal::PluginInstance trainer(fsdp, with_extra({{"model_path", model}, {"threads", threads}}), &services);
        std::vector<int32_t> ids, cu{0};
        for (int r = 0; r < gen_requests; ++r) {
          ids.insert(ids.end(), prompts[r].begin(), prompts[r].end());
          ids.insert(ids.end(), results[r].output_ids.begin(), results[r].output_ids.end());
          cu.push_back(static_cast<int32_t>(ids.size()));
        }
        areal::HostTensor<int32_t> ids_t(ids), cu_t(cu);
        areal::TensorMapBuilder b;
        b.add("input_ids", ids_t.dl()).add("cu_seqlens", cu_t.dl());
        DLManagedTensor* lp = nullptr;
        areal::throw_if_status(fsdp->train()->compute_logprobs(trainer.self(), b.get(), 1.0f, &lp), "compute_logprobs");
        const auto* v = static_cast<const float*>(lp->dl_tensor.data);
        double worst = 0, sum = 0;
        size_t n = 0;
        for (int r = 0; r < gen_requests; ++r)
          for (size_t t = 0; t < results[r].output_ids.size(); ++t, ++n) {
            const double d = std::abs(static_cast<double>(v[cu[r] + gen_prompt + t]) - results[r].logprobs[t]);
            worst = std::max(worst, d);
            sum += d;
          }
        lp->deleter(lp);
        out["engine_trainer_logprob_max_abs_diff"] = worst;
        out["engine_trainer_logprob_mean_abs_diff"] = n ? sum / static_cast<double>(n) : 0.0;
        out["engine_trainer_tokens"] = n;
        // AREAL_BENCH_GENERATED=PATH: the generated sequences and the log-probs the
        // engine recorded, for gpu_check to score with transformers in float32.
        if (const char* path = std::getenv("AREAL_BENCH_GENERATED"); path && *path) {
          nlohmann::json g{{"prompt_length", gen_prompt}, {"sequences", nlohmann::json::array()}, {"engine_logprobs", nlohmann::json::array()}};
          for (int r = 0; r < gen_requests; ++r) {
            std::vector<int32_t> seq(prompts[r]);
            seq.insert(seq.end(), results[r].output_ids.begin(), results[r].output_ids.end());
            g["sequences"].push_back(seq);
            g["engine_logprobs"].push_back(results[r].logprobs);
          }
          std::ofstream(path) << g.dump();
        }
      }
      profiler.record("generate_trace.json", [&] { run(gen_tokens); });
    }
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    out["peak_rss_bytes"] = static_cast<double>(usage.ru_maxrss) * 1024;  // the whole process: model load included
    std::cout << out.dump() << std::endl;
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "areal_model_bench: " << e.what() << "\n";
    return 1;
  }
}
