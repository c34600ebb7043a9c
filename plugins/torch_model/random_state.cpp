#include "random_state.hpp"

#include <mutex>

#include <ATen/Context.h>
#include <ATen/core/Generator.h>

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

GeneratorReplay::GeneratorReplay(const torch::Device& device, const torch::Tensor& state)
    : device_(device), resume_(default_generator_state(device)) {
  set_default_generator_state(device, state);
}

GeneratorReplay::~GeneratorReplay() { set_default_generator_state(device_, resume_); }

}  // namespace areal::torch_model
