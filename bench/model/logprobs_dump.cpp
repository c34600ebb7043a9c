// Log-probs of given token sequences from the fsdp engine, through the
// plugin ABI, for parity checks against other implementations (the GPU
// check compares them with Hugging Face transformers on the same folder).
//   areal_logprobs_dump MODEL_DIR IN.json OUT.json [ENGINE_JSON]
// IN: {"sequences": [[token ids], ...]}; OUT: {"logprobs": [[log p(ids[t] |
// ids[<t]) for t >= 1], ...], "device": ..., "dtype": ...}. ENGINE_JSON adds
// to the engine's config (e.g. {"device": "cuda", "dtype": "bfloat16"}).
#include <dlpack/dlpack.h>

#include <fstream>
#include <iostream>
#include <cstdint>
#include <string>
#include <vector>
#include <exception>

#include <nlohmann/json.hpp>

#include "core/plugin_host/error.hpp"
#include "core/plugin_host/host_tensor.hpp"
#include "core/plugin_host/plugin_catalog.hpp"
#include "core/plugin_host/plugin_instance.hpp"
#include "core/plugin_host/string_writer.hpp"

int main(int argc, char** argv) {
  if (argc != 4 && argc != 5) {
    std::cerr << "usage: areal_logprobs_dump MODEL_DIR IN.json OUT.json [ENGINE_JSON]\n";
    return 2;
  }
  try {
    nlohmann::json cfg = argc == 5 ? nlohmann::json::parse(argv[4]) : nlohmann::json::object();
    cfg["model_path"] = argv[1];
    const auto in = nlohmann::json::parse(std::ifstream(argv[2]));
    areal::PluginCatalog catalog({AREAL_BENCH_PLUGIN_DIR});
    auto plugin = catalog.resolve("fsdp", AREAL_KIND_TRAIN);
    std::string name = "logprobs";
    auto services = areal::make_services(name);
    areal::PluginInstance engine(plugin, cfg.dump(), &services);
    nlohmann::json out{{"logprobs", nlohmann::json::array()}};
    // All sequences packed into one batch: the packed path is what training runs.
    std::vector<int32_t> ids, cu{0};
    for (const auto& seq : in["sequences"]) {
      for (const auto& t : seq) ids.push_back(t.get<int32_t>());
      cu.push_back(static_cast<int32_t>(ids.size()));
    }
    areal::HostTensor<int32_t> ids_t(ids), cu_t(cu);
    areal::TensorMapBuilder b;
    b.add("input_ids", ids_t.dl()).add("cu_seqlens", cu_t.dl());
    DLManagedTensor* lp = nullptr;
    areal::throw_if_status(plugin->train()->compute_logprobs(engine.self(), b.get(), 1.0f, &lp), "compute_logprobs");
    const auto* v = static_cast<const float*>(lp->dl_tensor.data);
    for (size_t s = 0; s + 1 < cu.size(); ++s)
      out["logprobs"].push_back(std::vector<float>(v + cu[s] + 1, v + cu[s + 1]));  // position 0 of a sequence has no log-prob
    lp->deleter(lp);
    std::ofstream(argv[3]) << out.dump() << "\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "areal_logprobs_dump: " << e.what() << "\n";
    return 1;
  }
}
