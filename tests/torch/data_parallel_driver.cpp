// One rank of the fsdp data-parallel check (tests/integration/data_parallel.sh).
//   areal_dp_driver train MODEL_DIR OUT_DIR WORLD RANK INIT_METHOD [DTYPE LR]
//     trains 4 steps on a fixed global batch (this rank takes sequences
//     i % WORLD == RANK), prints each step's stats, saves to OUT_DIR. The
//     even and the odd sequences each share a 6-token prompt, so each rank
//     computes its group's prefix once (train.prefix_sharing, issue #36).
//   areal_dp_driver compare DIR_A DIR_B TOLERANCE [mean]
//     exits 0 when every parameter agrees within TOLERANCE (with `mean`:
//     when the mean absolute difference over all parameters is within it).
#include <cmath>
#include <fstream>
#include <iostream>
#include <cstdint>
#include <string>
#include <vector>
#include <algorithm>
#include <exception>

#include <nlohmann/json.hpp>

#include "core/plugin_host/error.hpp"
#include "core/plugin_host/host_tensor.hpp"
#include "core/plugin_host/plugin_catalog.hpp"
#include "core/plugin_host/plugin_instance.hpp"
#include "core/plugin_host/string_writer.hpp"
#include "decoder_model.hpp"
#include "mean_nll_loss.hpp"

namespace {

int train(const std::string& model, const std::string& out, int world, int rank, const std::string& init, const std::string& dtype,
          double lr) {
  areal::PluginCatalog catalog({AREAL_TEST_PLUGIN_DIR});
  auto plugin = catalog.resolve("fsdp", AREAL_KIND_TRAIN);
  std::string name = "train";
  auto services = areal::make_services(name);
  const std::string cfg = nlohmann::json{{"model_path", model}, {"dtype", dtype}, {"lr", lr}, {"grad_clip", 0.5}, {"weight_decay", 0.01},
                                         {"micro_batch_tokens", 32}, {"world_size", world}, {"rank", rank}, {"init_method", init},
                                         {"timeout_seconds", 60}}
                              .dump();
  areal::PluginInstance engine(plugin, cfg, &services);
  areal_loss_fn loss = areal::testing::mean_nll_loss();
  for (int step = 0; step < 4; ++step) {
    std::vector<int32_t> ids, cu{0}, mask;
    for (const int seq : {0, 2, 4, 1, 3, 5}) {  // each group's rows together, as the trainer orders a batch
      const int len = 5 + (seq * 7 + step * 3) % 11;
      if (seq % world != rank) continue;
      for (int t = 0; t < len; ++t) {
        const int owner = t < 6 ? seq % 2 : seq;  // the group's prompt, then the sequence's own tokens
        ids.push_back((owner * 7919 + t * 104729 + step * 31) % 150000);
        mask.push_back(t >= 2 ? 1 : 0);  // a two-token "prompt" per sequence
      }
      cu.push_back(static_cast<int32_t>(ids.size()));
    }
    areal::HostTensor<int32_t> ids_t(ids), cu_t(cu), mask_t(mask);
    areal::TensorMapBuilder b;
    b.add("input_ids", ids_t.dl()).add("cu_seqlens", cu_t.dl()).add("loss_mask", mask_t.dl());
    areal::StringCollector stats;
    areal::throw_if_status(plugin->train()->train_step(engine.self(), b.get(), &loss, stats.writer()), "train_step");
    std::cout << "rank " << rank << " " << stats.text << std::endl;
  }
  const std::string spec = nlohmann::json{{"path", out}, {"optimizer", true}}.dump();
  areal::throw_if_status(plugin->train()->save(engine.self(), areal_str{spec.data(), spec.size()}), "save");
  std::ifstream status("/proc/self/status");  // the process's peak resident memory, for bench/model/run.sh
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmHWM:", 0) == 0) std::cout << "peak rank " << rank << " " << line << std::endl;
  return 0;
}

int compare(const std::string& a, const std::string& b, double tol, bool mean) {
  using areal::torch_model::DecoderModel;
  const DecoderModel ma = DecoderModel::load(a, torch::kFloat64), mb = DecoderModel::load(b, torch::kFloat64);
  double worst = 0, sum = 0;
  int64_t n = 0;
  for (const auto& [name, t] : ma.named_parameters()) {
    const torch::Tensor d = (t - mb.p(name)).abs();
    worst = std::max(worst, d.max().item<double>());
    sum += d.sum().item<double>();
    n += d.numel();
  }
  const double avg = sum / static_cast<double>(std::max<int64_t>(1, n));
  std::cout << "max |a - b| over all parameters: " << worst << ", mean " << avg << " (tolerance " << tol << (mean ? " on the mean" : "")
            << ")" << std::endl;
  return (mean ? avg : worst) <= tol ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::string mode = argc > 1 ? argv[1] : "";
    if (mode == "train" && (argc == 7 || argc == 9))
      return train(argv[2], argv[3], std::stoi(argv[4]), std::stoi(argv[5]), argv[6], argc == 9 ? argv[7] : "float32", argc == 9 ? std::stod(argv[8]) : 1e-5);
    if (mode == "compare" && (argc == 5 || (argc == 6 && std::string(argv[5]) == "mean")))
      return compare(argv[2], argv[3], std::stod(argv[4]), argc == 6);
    std::cerr << "usage: areal_dp_driver train MODEL OUT WORLD RANK INIT | compare A B TOL\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "areal_dp_driver: " << e.what() << "\n";
    return 1;
  }
}
