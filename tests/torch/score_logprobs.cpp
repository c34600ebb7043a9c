// areal's own log-probs of given token sequences (plugins/torch_model, the
// code the trainer and the local engine share), with the interface of the
// independent references (tests/torch/hf_reference_logprobs.py,
// tests/parity/reference_logprobs_transformers.py), so a test can compare
// any of them, or a real server's recorded log-probs, on the same ids.
//   areal_score_logprobs MODEL_DIR IN.json OUT.json [TEMPERATURE]
// IN: {"sequences": [[token ids], ...]}
// OUT: {"logprobs": [[log p(ids[t] | ids[<t]) for t >= 1], ...]}
#include <fstream>
#include <iostream>
#include <cstdint>
#include <string>
#include <vector>
#include <stdexcept>
#include <exception>

#include <nlohmann/json.hpp>

#include "decoder_model.hpp"

int main(int argc, char** argv) {
  if (argc != 4 && argc != 5) {
    std::cerr << "usage: areal_score_logprobs MODEL_DIR IN.json OUT.json [TEMPERATURE]\n";
    return 2;
  }
  try {
    const float temperature = argc == 5 ? std::stof(argv[4]) : 1.0f;
    const auto model = areal::torch_model::DecoderModel::load(argv[1], torch::kFloat32);
    std::ifstream in_file(argv[2]);
    const nlohmann::json in = nlohmann::json::parse(in_file);
    nlohmann::json out = {{"logprobs", nlohmann::json::array()}};
    torch::NoGradGuard no_grad;
    for (const auto& seq : in.at("sequences")) {
      const auto ids = seq.get<std::vector<int64_t>>();
      if (ids.size() < 2) throw std::runtime_error("every sequence needs at least 2 tokens");
      const torch::Tensor t = torch::tensor(ids, torch::kInt64);
      const torch::Tensor lp = model.logprobs(t, torch::tensor({int64_t{0}, static_cast<int64_t>(ids.size())}, torch::kInt64), temperature);
      const torch::Tensor tail = lp.narrow(0, 1, lp.size(0) - 1).to(torch::kFloat64).contiguous();
      out["logprobs"].push_back(std::vector<double>(tail.data_ptr<double>(), tail.data_ptr<double>() + tail.numel()));
    }
    std::ofstream(argv[3]) << out.dump();
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "areal_score_logprobs: " << e.what() << "\n";
    return 1;
  }
}
