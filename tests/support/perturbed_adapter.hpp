// A LoRA adapter that looks trained (B not zero, so every targeted module's
// output moves) on an HF folder's model, saved as a PEFT folder: for tests
// that serve or train with an adapter whose effect must show.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "decoder_model.hpp"
#include "lora_adapter.hpp"
#include "test_temp_dir.hpp"

namespace areal::testing {

// Rank 4, alpha 8, every linear module; its parameters moved by N(0, 0.3)
// noise drawn with `seed`; saved under the test temp folder `name`.
inline std::string perturbed_adapter_dir(const std::string& model_dir, const std::string& name, uint64_t seed = 8) {
  const std::string dir = test_temp_dir(name);
  const auto m = areal::torch_model::DecoderModel::load(model_dir, torch::kFloat32);
  auto a = areal::torch_model::LoraAdapter::init(
      areal::torch_model::LoraConfig::from_json(nlohmann::json{{"rank", 4}, {"alpha", 8}, {"target_modules", "all-linear"}}, "lora"), m.config(), 5);
  torch::NoGradGuard no_grad;
  torch::manual_seed(seed);
  for (auto& t : a.parameters()) t.add_(torch::randn_like(t) * 0.3);
  a.save(dir, model_dir);
  return dir;
}

}  // namespace areal::testing
