// Kineto traces for areal_model_bench (AREAL_BENCH_PROFILE=DIR): a module it
// opens with dlopen when asked, so that a libtorch whose profiler API
// differs costs the trace, never the benchmark's build. CUDA kernels,
// copies and memsets of every thread are recorded (CUPTI); operators only on
// the calling thread. scripts/gpu_check.sh summarises the traces with
// bench/gpu/summarize_trace.py.
#include <exception>
#include <iostream>
#include <memory>
#include <set>
#include <string>

#include <torch/csrc/autograd/profiler_kineto.h>

namespace {

namespace impl = torch::profiler::impl;

const std::set<impl::ActivityType>& activities() {
  static const std::set<impl::ActivityType> kinds{impl::ActivityType::CPU, impl::ActivityType::CUDA};
  return kinds;
}

}  // namespace

// 0 when recording started.
extern "C" __attribute__((visibility("default"))) int areal_profile_begin() {
  try {
    const impl::ProfilerConfig config(impl::ProfilerState::KINETO);
    torch::autograd::profiler::prepareProfiler(config, activities());
    torch::autograd::profiler::enableProfiler(config, activities());
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "areal_profile_begin: " << e.what() << "\n";
    return 1;
  }
}

// Stops recording and writes the Chrome trace to `path`; 0 when written.
extern "C" __attribute__((visibility("default"))) int areal_profile_end(const char* path) {
  try {
    const auto result = torch::autograd::profiler::disableProfiler();
    if (!result) return 1;
    result->save(path);
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "areal_profile_end: " << e.what() << "\n";
    return 1;
  }
}
