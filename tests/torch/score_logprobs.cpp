// areal's own log-probs of given token sequences (plugins/torch_model, the
// code the trainer and the local engine share), with the interface of the
// independent references (tests/torch/hf_reference_logprobs.py,
// tests/parity/reference_logprobs_transformers.py), so a test can compare
// any of them, or a real server's recorded log-probs, on the same ids.
//   areal_score_logprobs [--lora ADAPTER_DIR] [--save-lora OUT_DIR] MODEL_DIR IN.json OUT.json [TEMPERATURE]
// IN: {"sequences": [[token ids], ...]}
// OUT: {"logprobs": [[log p(ids[t] | ids[<t]) for t >= 1], ...]}, and for a
// mixture-of-experts model also "experts": [[[[expert, ...] per MoE layer]
// per token] per sequence] (what the routers chose) and "aux_loss": [the
// load-balancing loss of each sequence].
// --lora scores through a PEFT adapter folder (LoraAdapter::load);
// --save-lora writes that adapter back out (LoraAdapter::save).
#include <fstream>
#include <iostream>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>
#include <stdexcept>
#include <exception>

#include <nlohmann/json.hpp>

#include "decoder_model.hpp"

int main(int argc, char** argv) {
  std::string lora, save_lora;
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if ((a == "--lora" || a == "--save-lora") && i + 1 < argc) (a == "--lora" ? lora : save_lora) = argv[++i];
    else args.push_back(a);
  }
  if ((args.size() != 3 && args.size() != 4) || (!save_lora.empty() && lora.empty())) {
    std::cerr << "usage: areal_score_logprobs [--lora ADAPTER_DIR] [--save-lora OUT_DIR] MODEL_DIR IN.json OUT.json [TEMPERATURE]\n";
    return 2;
  }
  try {
    const float temperature = args.size() == 4 ? std::stof(args[3]) : 1.0f;
    auto model = areal::torch_model::DecoderModel::load(args[0], torch::kFloat32);
    if (!lora.empty()) {
      auto adapter = std::make_shared<areal::torch_model::LoraAdapter>(areal::torch_model::LoraAdapter::load(lora, model.config()));
      if (!save_lora.empty()) adapter->save(save_lora, args[0]);
      model.set_lora(adapter);
    }
    std::ifstream in_file(args[1]);
    const nlohmann::json in = nlohmann::json::parse(in_file);
    nlohmann::json out = {{"logprobs", nlohmann::json::array()}};
    torch::NoGradGuard no_grad;
    for (const auto& seq : in.at("sequences")) {
      const auto ids = seq.get<std::vector<int64_t>>();
      if (ids.size() < 2) throw std::runtime_error("every sequence needs at least 2 tokens");
      const torch::Tensor t = torch::tensor(ids, torch::kInt64);
      areal::torch_model::MoeRouting routing;
      routing.record = routing.keep_logits = model.config().moe_layer_count() > 0;
      const torch::Tensor lp = model.logprobs(t, torch::tensor({int64_t{0}, static_cast<int64_t>(ids.size())}, torch::kInt64), temperature, false, &routing);
      if (routing.record) {
        const torch::Tensor experts = torch::stack(routing.chosen, 1).contiguous();  // [T, moe layers, k]
        nlohmann::json per_token = nlohmann::json::array();
        for (int64_t i = 0; i < experts.size(0); ++i) {
          nlohmann::json layers = nlohmann::json::array();
          for (int64_t l = 0; l < experts.size(1); ++l) {
            const torch::Tensor e = std::get<0>(experts[i][l].sort()).contiguous();  // as a set: the order of equal-weight picks is not the math
            layers.push_back(std::vector<int64_t>(e.data_ptr<int64_t>(), e.data_ptr<int64_t>() + e.numel()));
          }
          per_token.push_back(layers);
        }
        out["experts"].push_back(per_token);
        const auto& c = model.config();
        out["aux_loss"].push_back(areal::torch_model::load_balancing_loss(routing.logits, c.num_experts, c.num_experts_per_tok).item<double>());
      }
      const torch::Tensor tail = lp.narrow(0, 1, lp.size(0) - 1).to(torch::kFloat64).contiguous();
      out["logprobs"].push_back(std::vector<double>(tail.data_ptr<double>(), tail.data_ptr<double>() + tail.numel()));
    }
    std::ofstream(args[2]) << out.dump();
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "areal_score_logprobs: " << e.what() << "\n";
    return 1;
  }
}
