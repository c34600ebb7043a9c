#include "kernel_probe.hpp"

#include <cstdio>
#include <exception>
#include <map>
#include <mutex>
#include <string>
#include <tuple>

namespace areal::torch_model {

bool probed(const char* kernel, const torch::Device& device, torch::ScalarType dtype, const std::function<void()>& probe, int64_t head_dim) {
  static std::mutex mu;
  static std::map<std::tuple<const char*, int, int, int64_t>, bool> known;  // kernel names are literals: no string built a call
  const auto key = std::make_tuple(kernel, static_cast<int>(device.index()), static_cast<int>(dtype), head_dim);
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = known.find(key); it != known.end()) return it->second;
  bool ok = true;
  try {
    probe();
  } catch (const std::exception& e) {
    ok = false;
    const std::string why = e.what();
    std::fprintf(stderr, "areal torch_model: %s is not available on %s (%s); using the portable path\n", kernel, device.str().c_str(),
                 why.substr(0, why.find('\n')).c_str());
  }
  known[key] = ok;
  return ok;
}

}  // namespace areal::torch_model
