// The vllm plugin's interruption contract against real vLLM (issue #28),
// the stock api_server in dev mode (inference.launcher: stock):
//  - a request paused mid-generation is aborted on the server; the weights
//    are reloaded from another folder (/collective_rpc reload_weights) under
//    version 7; after resume the request is resubmitted as prompt + tokens so
//    far. The output is whole, tokens before the pause carry version 0 and
//    match model A's log-probs (our own recomputation on the same ids), the
//    rest carry 7 and match model B's: the server really served B, and the
//    resubmitted prompt ended with the partial output;
//  - abort() ends a running request with ABORT and its tokens so far.
// Model A is restored (version 8) at the end for the tests that share the server.
//   areal_real_vllm_interrupt SERVER_URL MODEL_A MODEL_B
#include <chrono>
#include <cmath>
#include <iostream>
#include <thread>
#include <cstdint>
#include <string>
#include <vector>
#include <algorithm>
#include <exception>

#include <nlohmann/json.hpp>

#include "core/plugin_host/error.hpp"
#include "core/plugin_host/generation.hpp"
#include "core/plugin_host/plugin_catalog.hpp"
#include "core/plugin_host/plugin_instance.hpp"
#include "decoder_model.hpp"
#include "sampled_request.hpp"

namespace {

using namespace std::chrono_literals;
using areal::torch_model::DecoderModel;

constexpr double kBound = 1e-5;  // as tests/e2e/real_vllm_peers.py: fp32 here and there
int failures = 0;

void check(bool ok, const std::string& what) {
  std::cout << (ok ? "ok   " : "FAIL ") << what << std::endl;
  if (!ok) ++failures;
}

// log p(seq[t] | seq[<t]) for t in [from, seq.size()).
std::vector<double> our_logprobs(const DecoderModel& m, const std::vector<int32_t>& seq) {
  torch::NoGradGuard no_grad;
  const torch::Tensor ids = torch::tensor(std::vector<int64_t>(seq.begin(), seq.end()), torch::kInt64);
  const torch::Tensor lp = m.logprobs(ids, torch::tensor({int64_t{0}, ids.size(0)}, torch::kInt64), 1.0f).to(torch::kFloat64).contiguous();
  return std::vector<double>(lp.data_ptr<double>(), lp.data_ptr<double>() + lp.numel());
}

void submit(const areal_inference_vtable& vt, void* self, areal::CollectingSink& sink, uint64_t id, const std::vector<int32_t>& prompt,
            int32_t max_new) {
  areal::testing::submit_sampled(vt, self, sink.sink(), id, prompt, max_new);
}

void wait_for_tokens(const areal::CollectingSink& sink, size_t n) {
  for (int i = 0; i < 6000 && sink.result().output_ids.size() < n; ++i) std::this_thread::sleep_for(5ms);
}

void update(const areal_inference_vtable& vt, void* self, const std::string& dir, int64_t version) {
  const std::string spec = nlohmann::json{{"type", "disk"}, {"path", dir}, {"version", version}}.dump();
  areal::throw_if_status(vt.update_weights(self, areal_str{spec.data(), spec.size()}), "update_weights");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: areal_real_vllm_interrupt SERVER_URL MODEL_A MODEL_B\n";
    return 2;
  }
  const std::string url = argv[1], model_a = argv[2], model_b = argv[3];
  try {
    areal::PluginCatalog catalog({AREAL_TEST_PLUGIN_DIR});
    auto plugin = catalog.resolve("vllm", AREAL_KIND_INFERENCE);
    std::string name = "inference";
    auto services = areal::make_services(name);
    areal::PluginInstance inst(plugin, nlohmann::json{{"servers", {url}}, {"launcher", "stock"}}.dump(), &services);
    const auto& vt = *plugin->inference();
    const DecoderModel a = DecoderModel::load(model_a, torch::kFloat32), b = DecoderModel::load(model_b, torch::kFloat32);
    const std::vector<int32_t> prompt = {785, 3974, 13876, 38835, 34208, 916, 279, 15678, 5562, 13};

    // Pause, reload B as version 7, resume: the request continues on B.
    areal::CollectingSink sink;
    submit(vt, inst.self(), sink, areal::next_request_id(), prompt, 1500);
    wait_for_tokens(sink, 8);
    areal::throw_if_status(vt.pause(inst.self()), "pause");
    const size_t before = sink.result().output_ids.size();
    std::this_thread::sleep_for(300ms);
    check(sink.result().output_ids.size() == before, "no tokens arrive while paused (" + std::to_string(before) + " before the pause)");
    check(before >= 8 && before < 1500, "the pause came mid-generation");
    update(vt, inst.self(), model_b, 7);  // reload_weights + reset_prefix_cache while paused
    areal::throw_if_status(vt.resume(inst.self()), "resume");
    check(sink.wait(300s), "the resubmitted request finishes");
    const auto r = sink.result();
    check(r.finish_reason == AREAL_FINISH_LENGTH, std::string("finish reason length (") + areal::finish_reason_name(r.finish_reason) + ") " +
                                                      r.error_message);
    check(r.output_ids.size() == 1500 && r.logprobs.size() == 1500 && r.versions.size() == 1500, "1500 tokens with log-probs and versions");
    size_t old_tokens = 0;
    bool ordered = true;
    for (size_t i = 0; i < r.versions.size(); ++i) {
      if (r.versions[i] == 0) ordered = ordered && old_tokens++ == i;
      else ordered = ordered && r.versions[i] == 7;
    }
    check(ordered, "versions: 0 up to the pause, then 7");
    check(old_tokens == before, "the " + std::to_string(before) + " tokens before the pause keep version 0");
    std::vector<int32_t> seq = prompt;
    seq.insert(seq.end(), r.output_ids.begin(), r.output_ids.end());
    const auto lp_a = our_logprobs(a, seq), lp_b = our_logprobs(b, seq);
    double worst = 0, differ = 0;
    for (size_t i = 0; i < r.output_ids.size(); ++i) {
      const size_t t = prompt.size() + i;
      worst = std::max(worst, std::abs(r.logprobs[i] - (r.versions[i] == 0 ? lp_a[t] : lp_b[t])));
      differ = std::max(differ, std::abs(lp_a[t] - lp_b[t]));
    }
    check(worst <= kBound, "each log-prob is its version's model's (A before the pause, B after), within " + std::to_string(worst));
    check(differ > 0.1, "A and B really differ on these tokens (by up to " + std::to_string(differ) + ")");

    // abort(): ends with ABORT and the tokens so far.
    areal::CollectingSink aborted;
    const uint64_t id = areal::next_request_id();
    submit(vt, inst.self(), aborted, id, prompt, 3000);
    wait_for_tokens(aborted, 3);
    areal::throw_if_status(vt.abort(inst.self(), id), "abort");
    check(aborted.wait(30s), "the aborted request ends");
    const auto ar = aborted.result();
    check(ar.finish_reason == AREAL_FINISH_ABORT && ar.output_ids.size() >= 3 && ar.output_ids.size() < 3000,
          "abort() ends it with ABORT after " + std::to_string(ar.output_ids.size()) + " tokens");

    update(vt, inst.self(), model_a, 8);
  } catch (const std::exception& e) {
    std::cout << "FAIL " << e.what() << std::endl;
    ++failures;
  }
  std::cout << "real vLLM interrupt: " << (failures ? 0 : 1) << " passed, " << (failures ? 1 : 0) << " failed" << std::endl;
  return failures ? 1 : 0;
}
