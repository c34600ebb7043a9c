// The default random generator of a device, which LoRA dropout draws from:
// read and set whole, so a checkpointed layer's recompute and a resumed run
// draw the masks the first pass and the uninterrupted run drew.
#pragma once

#include <string>

#include <torch/types.h>

namespace areal::torch_model {

// The state of `device`'s default generator (a small byte tensor on the host).
torch::Tensor default_generator_state(const torch::Device& device);
// Sets `device`'s default generator to a state default_generator_state gave.
void set_default_generator_state(const torch::Device& device, const torch::Tensor& state);

// The state in a file, for checkpoints. Restoring returns "" when restored,
// else why not ("does not exist", or "was not restored (...)" for a damaged
// file or another device type's state), leaving the generator as it was.
void save_default_generator_state(const torch::Device& device, const std::string& path);
std::string restore_default_generator_state(const torch::Device& device, const std::string& path);

// Sets the generator of `device` to `state` for its lifetime, then back to
// where it was, so that code drawing after it sees no replay.
class GeneratorReplay {
 public:
  GeneratorReplay(const torch::Device& device, const torch::Tensor& state);
  ~GeneratorReplay();
  GeneratorReplay(const GeneratorReplay&) = delete;
  GeneratorReplay& operator=(const GeneratorReplay&) = delete;

 private:
  torch::Device device_;
  torch::Tensor resume_;
};

}  // namespace areal::torch_model
