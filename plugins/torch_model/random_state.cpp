#include "random_state.hpp"

#include <algorithm>
#include <exception>
#include <filesystem>
#include <mutex>
#include <stdexcept>
#include <vector>

#include <ATen/Context.h>
#include <ATen/core/Generator.h>
#include <torch/serialize.h>

namespace areal::torch_model {

torch::Tensor default_generator_state(const torch::Device& device) {
  at::Generator g = at::globalContext().defaultGenerator(device);
  std::lock_guard<std::mutex> lock(g.mutex());
  return g.get_state();
}

void set_default_generator_state(const torch::Device& device, const torch::Tensor& state) {
  at::Generator g = at::globalContext().defaultGenerator(device);
  std::lock_guard<std::mutex> lock(g.mutex());
  g.set_state(state);
}

void save_default_generator_state(const torch::Device& device, const std::string& path) {
  torch::save(std::vector<torch::Tensor>{default_generator_state(device)}, path);
}

std::string restore_default_generator_state(const torch::Device& device, const std::string& path) {
  if (!std::filesystem::exists(path)) return "does not exist";
  try {
    std::vector<torch::Tensor> state;
    torch::load(state, path);
    if (state.size() != 1) throw std::runtime_error("not one generator state");
    set_default_generator_state(device, state[0]);
    return "";
  } catch (const std::exception& e) {
    const std::string what = e.what();
    return "was not restored (" + what.substr(0, std::min(what.find('\n'), size_t{160})) + ")";
  }
}

GeneratorReplay::GeneratorReplay(const torch::Device& device, const torch::Tensor& state)
    : device_(device), resume_(default_generator_state(device)) {
  set_default_generator_state(device, state);
}

GeneratorReplay::~GeneratorReplay() { set_default_generator_state(device_, resume_); }

}  // namespace areal::torch_model
