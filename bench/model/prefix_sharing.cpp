// Train-step time with and without prefix sharing (issue #36), in one run,
// on the same rows: the fsdp plugin through the ABI, once with
// train.prefix_sharing off (every row computed on its own) and once with
// auto (each micro-batch's shared prefixes once).
//   areal_prefix_sharing_bench MODEL_DIR THREADS STEPS MICRO_BATCH_TOKENS ROWS.jsonl
// ROWS.jsonl: a row a line, {"input_ids": [...], "loss_mask": [...]}.
// Prints one JSON object: for each way, the mean step seconds over STEPS
// timed steps (after a warm-up step), the tokens its forward computed, the
// micro-batches, the first step's loss (the two must agree: same loss,
// less work) and the peak memory; and the speed-up.
#include <sys/resource.h>

#include <chrono>
#include <cstdint>
#include <exception>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>
#include <algorithm>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "core/plugin_host/error.hpp"
#include "core/plugin_host/host_tensor.hpp"
#include "core/plugin_host/plugin_catalog.hpp"
#include "core/plugin_host/plugin_instance.hpp"
#include "core/plugin_host/string_writer.hpp"
#include "mean_nll_loss.hpp"

int main(int argc, char** argv) {
  if (argc != 6) {
    std::cerr << "usage: areal_prefix_sharing_bench MODEL_DIR THREADS STEPS MICRO_BATCH_TOKENS ROWS.jsonl\n";
    return 2;
  }
  try {
    const std::string model = argv[1];
    const int threads = std::stoi(argv[2]), steps = std::stoi(argv[3]);
    const int64_t budget = std::stoll(argv[4]);
    std::vector<int32_t> ids, mask, cu = {0};
    std::ifstream in(argv[5]);
    for (std::string line; std::getline(in, line);) {
      if (line.empty()) continue;
      const auto row = nlohmann::json::parse(line);
      const auto i = row["input_ids"].get<std::vector<int32_t>>(), m = row["loss_mask"].get<std::vector<int32_t>>();
      if (i.size() != m.size()) throw std::runtime_error("a row's input_ids and loss_mask differ in length");
      ids.insert(ids.end(), i.begin(), i.end()), mask.insert(mask.end(), m.begin(), m.end());
      cu.push_back(static_cast<int32_t>(ids.size()));
    }
    if (cu.size() < 2) throw std::runtime_error(std::string("no rows in ") + argv[5]);
    areal::PluginCatalog catalog({AREAL_BENCH_PLUGIN_DIR});
    std::string name = "bench";
    auto services = areal::make_services(name);
    auto fsdp = catalog.resolve("fsdp", AREAL_KIND_TRAIN);
    areal::HostTensor<int32_t> t_ids(ids), t_cu(cu), t_mask(mask);
    areal::TensorMapBuilder batch;
    batch.add("input_ids", t_ids.dl()).add("cu_seqlens", t_cu.dl()).add("loss_mask", t_mask.dl());
    areal_loss_fn nll = areal::testing::mean_nll_loss();
    nlohmann::json out{{"rows", cu.size() - 1}, {"tokens", ids.size()}, {"threads", threads}, {"steps", steps}, {"micro_batch_tokens", budget}};
    for (const char* way : {"off", "auto"}) {
      areal::PluginInstance engine(fsdp,
                                   nlohmann::json{{"model_path", model}, {"lr", 1e-5}, {"threads", threads}, {"micro_batch_tokens", budget},
                                                  {"prefix_sharing", way}}
                                       .dump(),
                                   &services);
      nlohmann::json first;
      double seconds = 0;
      for (int s = 0; s <= steps; ++s) {
        areal::StringCollector stats;
        const auto t0 = std::chrono::steady_clock::now();
        areal::throw_if_status(fsdp->train()->train_step(engine.self(), batch.get(), &nll, stats.writer()), "train_step");
        if (s > 0) seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();  // step 0 warms up
        if (s == 0) first = nlohmann::json::parse(stats.text);
      }
      out[way] = {{"step_seconds", seconds / std::max(1, steps)}, {"computed_tokens", first["computed_tokens"]}, {"micro_batches", first["micro_batches"]},
                  {"first_loss", first["loss"]}, {"peak_memory_bytes", first["peak_device_memory_bytes"]}};
    }
    out["speedup"] = out["off"]["step_seconds"].get<double>() / out["auto"]["step_seconds"].get<double>();
    std::cout << out.dump() << "\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "areal_prefix_sharing_bench: " << e.what() << "\n";
    return 1;
  }
}
