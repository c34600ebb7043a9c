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
// --tree scores every sequence in one forward over their prefix tree, each
// shared prefix computed once, through the trainer's own code for it
// (plugins/train_fsdp/prefix_sharing: rows_logprobs), each row's log-probs,
// experts and balancing loss gathered back from it.
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
#include "prefix_sharing.hpp"

int main(int argc, char** argv) {
  std::string lora, save_lora;
  std::vector<std::string> args;
  bool tree = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--tree") tree = true;
    else if ((a == "--lora" || a == "--save-lora") && i + 1 < argc) (a == "--lora" ? lora : save_lora) = argv[++i];
    else args.push_back(a);
  }
  if ((args.size() != 3 && args.size() != 4) || (!save_lora.empty() && lora.empty())) {
    std::cerr << "usage: areal_score_logprobs [--tree] [--lora ADAPTER_DIR] [--save-lora OUT_DIR] MODEL_DIR IN.json OUT.json [TEMPERATURE]\n";
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
    // Each sequence's log-probs [T], and for a MoE model its experts [T, moe layers, k] and router logits (one [T, E] a MoE layer).
    struct Scored {
      torch::Tensor lp, experts;
      std::vector<torch::Tensor> logits;
    };
    std::vector<std::vector<int64_t>> seqs;
    for (const auto& seq : in.at("sequences")) {
      seqs.push_back(seq.get<std::vector<int64_t>>());
      if (seqs.back().size() < 2) throw std::runtime_error("every sequence needs at least 2 tokens");
    }
    const bool moe = model.config().moe_layer_count() > 0;
    std::vector<Scored> scored;
    if (tree) {  // the trainer's own path: fsdp's rows_logprobs over one tree micro-batch
      std::vector<int32_t> ids;
      std::vector<int64_t> bounds = {0};
      for (const auto& s : seqs) ids.insert(ids.end(), s.begin(), s.end()), bounds.push_back(static_cast<int64_t>(ids.size()));
      areal::fsdp::MicroBatch all;
      all.end = static_cast<int64_t>(seqs.size()), all.row_tokens = bounds.back(), all.tree = true;
      areal::torch_model::MoeRouting routing;
      routing.record = routing.keep_logits = moe;
      const torch::Tensor lp = areal::fsdp::rows_logprobs(model, ids, bounds, all, temperature, false, &routing);  // by row token
      for (size_t r = 0; r < seqs.size(); ++r) {
        const int64_t at = bounds[r], n = bounds[r + 1] - bounds[r];
        Scored sc{lp.narrow(0, at, n), {}, {}};
        if (moe) {
          sc.experts = torch::stack(routing.chosen, 1).narrow(0, at, n);
          for (const auto& l : routing.logits) sc.logits.push_back(l.narrow(0, at, n));
        }
        scored.push_back(sc);
      }
    } else {
      for (const auto& ids : seqs) {
        areal::torch_model::MoeRouting routing;
        routing.record = routing.keep_logits = moe;
        const torch::Tensor t = torch::tensor(ids, torch::kInt64);
        Scored sc{model.logprobs(t, torch::tensor({int64_t{0}, static_cast<int64_t>(ids.size())}, torch::kInt64), temperature, false, &routing), {}, {}};
        if (moe) sc.experts = torch::stack(routing.chosen, 1), sc.logits = routing.logits;
        scored.push_back(sc);
      }
    }
    for (const Scored& sc : scored) {
      if (moe) {
        const torch::Tensor experts = sc.experts.contiguous();  // [T, moe layers, k]
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
        out["aux_loss"].push_back(areal::torch_model::load_balancing_loss(sc.logits, c.num_experts, c.num_experts_per_tok).item<double>());
      }
      const torch::Tensor tail = sc.lp.narrow(0, 1, sc.lp.size(0) - 1).to(torch::kFloat64).contiguous();
      out["logprobs"].push_back(std::vector<double>(tail.data_ptr<double>(), tail.data_ptr<double>() + tail.numel()));
    }
    std::ofstream(args[2]) << out.dump();
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "areal_score_logprobs: " << e.what() << "\n";
    return 1;
  }
}
