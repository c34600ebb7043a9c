// sft: supervised fine-tuning as an algorithm plugin. The loss is the mean
// negative log-likelihood over loss-mask tokens:
//   L = -(1/N) * sum_t mask_t * logp_t,   N = sum_t mask_t
//   dL/dlogp_t = -mask_t / N
// SFT uses no advantages; compute_advantages writes zeros so a trainer can
// run it through the same pipeline as RL algorithms.
#include <cmath>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "areal/sdk.hpp"
#include "areal/sdk_json.hpp"
#include "tensor_view.hpp"

namespace {

namespace sdk = areal::sdk;
using areal::algo::vector_of;

class Sft {
 public:
  static constexpr const char* kName = "sft";
  static constexpr const char* kVersion = "1.0.0";
  static constexpr const char* kDescription = "Supervised fine-tuning: mean token NLL over the loss mask.";
  static constexpr const char* kConfigSchema = R"({"type": "object", "keys": {}})";

  explicit Sft(const sdk::CreateContext& ctx) { sdk::parse_object(ctx.config_json(), "sft: config"); }

  void compute_advantages(const areal_tensor_map& batch, const areal_tensor_map& out) {
    size_t t_mask = 0, t_adv = 0;
    vector_of<int32_t>(batch, "loss_mask", kDLInt, &t_mask);
    float* adv = vector_of<float>(out, "advantages", kDLFloat, &t_adv);
    if (t_adv != t_mask) throw sdk::invalid_argument("advantages and loss_mask differ in length");
    for (size_t i = 0; i < t_adv; ++i) adv[i] = 0.0f;
  }

  double loss(const areal_tensor_map& batch, DLTensor& grad, std::string& stats) {
    size_t t_mask = 0, t_lp = 0;
    const int32_t* mask = vector_of<int32_t>(batch, "loss_mask", kDLInt, &t_mask);
    const float* logp = vector_of<float>(batch, "new_logprobs", kDLFloat, &t_lp);
    if (t_mask != t_lp) throw sdk::invalid_argument("loss_mask and new_logprobs differ in length");
    if (grad.ndim != 1 || static_cast<size_t>(grad.shape[0]) != t_lp || grad.dtype.code != kDLFloat || grad.dtype.bits != 32)
      throw sdk::invalid_argument("grad must be float32 with the length of new_logprobs");
    float* g = reinterpret_cast<float*>(static_cast<char*>(grad.data) + grad.byte_offset);
    size_t n = 0;
    for (size_t i = 0; i < t_mask; ++i) n += mask[i] != 0;
    double sum = 0;
    for (size_t i = 0; i < t_mask; ++i) {
      g[i] = 0.0f;
      if (mask[i] == 0) continue;
      sum += logp[i];
      g[i] = static_cast<float>(-1.0 / n);
    }
    const double l = n == 0 ? 0.0 : -sum / n;
    // loss_tokens weighs this micro-batch in the step's mean (core/trainer/algorithm_loss.cpp).
    stats = nlohmann::json{{"nll", l}, {"loss_tokens", n}}.dump();
    return l;
  }
};

}  // namespace

AREAL_EXPORT_ALGORITHM(Sft)
