// areal's AdamW (plugins/train_fsdp/sharded_adamw) and global-norm clipping
// (gradient_clip.hpp) against torch.optim.AdamW and clip_grad_norm_ from
// Debian's python3-torch (optimizer_reference.py): the same parameters,
// gradients (some large enough to be clipped) and learning rates over
// several steps must give the same parameters.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>
#include <cstdint>
#include <algorithm>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "gradient_clip.hpp"
#include "sharded_adamw.hpp"
#include "test_temp_dir.hpp"

namespace {

std::vector<float> values(const torch::Tensor& t) {
  const torch::Tensor c = t.contiguous();
  return std::vector<float>(c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
}

struct Case {
  double weight_decay, max_norm;
};

}  // namespace

class OptimizerReference : public ::testing::TestWithParam<Case> {};

TEST_P(OptimizerReference, AdamWAndClippingMatchTorchOptim) {
  const Case c = GetParam();
  torch::manual_seed(7);
  const int64_t n = 257, steps = 6;
  const double beta1 = 0.9, beta2 = 0.95, eps = 1e-8;
  const std::vector<double> lrs = {1e-2, 5e-3, 2e-2, 1e-3, 1e-2, 3e-3};  // a schedule, not a constant
  const std::vector<double> scales = {0.05, 4.0, 0.01, 20.0, 1.0, 0.3};   // some steps exceed max_norm
  const torch::Tensor params0 = torch::randn({n});
  std::vector<torch::Tensor> grads;
  for (int64_t k = 0; k < steps; ++k) grads.push_back(torch::randn({n}) * scales[static_cast<size_t>(k)]);

  torch::Tensor p = params0.clone();
  areal::fsdp::ShardedAdamW opt(p, {beta1, beta2, eps, c.weight_decay});
  std::vector<std::vector<float>> ours;
  std::vector<double> our_norms;
  for (int64_t k = 0; k < steps; ++k) {
    torch::Tensor g = grads[static_cast<size_t>(k)].clone();
    const double norm = g.norm().item<double>();
    our_norms.push_back(norm);
    if (const double m = areal::fsdp::clip_coefficient(norm, c.max_norm); m < 1.0) g.mul_(m);
    opt.step(p, g, lrs[static_cast<size_t>(k)], k + 1);
    ours.push_back(values(p));
  }

  nlohmann::json in = {{"params", values(params0)}, {"lrs", lrs}, {"beta1", beta1}, {"beta2", beta2}, {"eps", eps},
                       {"weight_decay", c.weight_decay}, {"max_norm", c.max_norm}, {"grads", nlohmann::json::array()}};
  for (const auto& g : grads) in["grads"].push_back(values(g));
  const auto dir = std::filesystem::path(areal::testing::test_temp_dir("optim-ref"));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "in.json") << in.dump();
  const std::string cmd = "/usr/bin/python3 " + std::string(AREAL_TEST_TORCH_DIR) + "/optimizer_reference.py " + (dir / "in.json").string() +
                          " " + (dir / "out.json").string();
  ASSERT_EQ(std::system(cmd.c_str()), 0) << "the torch reference failed (python3-torch is installed by scripts/setup.sh): " << cmd;
  const nlohmann::json ref = nlohmann::json::parse(std::ifstream(dir / "out.json"));
  std::filesystem::remove_all(dir);

  ASSERT_EQ(ref["params"].size(), static_cast<size_t>(steps));
  for (int64_t k = 0; k < steps; ++k) {
    const auto want = ref["params"][static_cast<size_t>(k)].get<std::vector<float>>();
    EXPECT_NEAR(our_norms[static_cast<size_t>(k)], ref["norms"][static_cast<size_t>(k)].get<double>(), 1e-5 * our_norms[static_cast<size_t>(k)]);
    double worst = 0;
    for (int64_t i = 0; i < n; ++i) worst = std::max(worst, std::abs(double(ours[static_cast<size_t>(k)][static_cast<size_t>(i)]) - want[static_cast<size_t>(i)]));
    EXPECT_LE(worst, 1e-6) << "step " << k + 1 << ": parameters differ from torch.optim.AdamW by up to " << worst;
  }
  // The clipping was exercised: at least one step's norm was above max_norm.
  if (c.max_norm > 0) {
    bool clipped = false;
    for (double v : our_norms) clipped = clipped || v > c.max_norm;
    EXPECT_TRUE(clipped);
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, OptimizerReference,
                         ::testing::Values(Case{0.0, 1.0}, Case{0.1, 0.5}, Case{0.01, 0.0}));
