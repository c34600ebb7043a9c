// Behavioural checks for train plugins on a tiny packed batch: log-prob
// shape and values, one optimizer step lowers the NLL, save/load round-trip,
// versions.
#include <cmath>
#include <unistd.h>

#include <filesystem>
#include <cstdint>
#include <string>
#include <vector>
#include <memory>

#include <nlohmann/json.hpp>

#include "core/plugin_host/host_tensor.hpp"
#include "core/plugin_host/plugin_instance.hpp"
#include "checker.hpp"

namespace areal::conformance {
namespace {

struct Batch {
  HostTensor<int32_t> cu_seqlens{{0, 4, 7}};
  HostTensor<int32_t> input_ids{{1, 2, 3, 4, 2, 3, 5}};
  HostTensor<int32_t> loss_mask{{0, 1, 1, 1, 0, 1, 1}};
  TensorMapBuilder map() {
    TensorMapBuilder b;
    b.add("cu_seqlens", cu_seqlens.dl()).add("input_ids", input_ids.dl()).add("loss_mask", loss_mask.dl());
    return b;
  }
};

std::vector<float> logprobs(const areal_train_vtable& vt, void* self, Batch& batch) {
  TensorMapBuilder m = batch.map();
  DLManagedTensor* out = nullptr;
  throw_if_status(vt.compute_logprobs(self, m.get(), 1.0f, &out), "compute_logprobs");
  expect(out != nullptr, "compute_logprobs returned no tensor");
  const DLTensor& t = out->dl_tensor;
  std::vector<float> v;
  bool ok = t.device.device_type == kDLCPU && t.ndim == 1 && t.dtype.code == kDLFloat && t.dtype.bits == 32;
  if (ok) {
    const float* d = reinterpret_cast<const float*>(static_cast<const char*>(t.data) + t.byte_offset);
    v.assign(d, d + t.shape[0]);
  }
  expect(out->deleter != nullptr, "returned tensor has no deleter (ownership passes to the caller)");
  out->deleter(out);
  expect(ok, "log-probs must be a 1-D float32 CPU tensor");
  return v;
}

// -mean(masked logp) and its gradient: the simplest valid loss.
areal_status* nll(void*, const areal_tensor_map* batch, double* loss, DLTensor* grad, const areal_writer*) {
  const DLTensor* mask = nullptr;
  const DLTensor* lp = nullptr;
  for (size_t i = 0; i < batch->count; ++i) {
    std::string n(batch->names[i].data, batch->names[i].size);
    if (n == "loss_mask") mask = batch->tensors[i];
    if (n == "new_logprobs") lp = batch->tensors[i];
  }
  if (!mask || !lp) return make_status(AREAL_CODE_INVALID_ARGUMENT, "train_step must pass loss_mask and new_logprobs to the loss");
  const auto* m = static_cast<const int32_t*>(mask->data);
  const auto* l = static_cast<const float*>(lp->data);
  auto* g = static_cast<float*>(grad->data);
  double n = 0, sum = 0;
  for (int64_t i = 0; i < lp->shape[0]; ++i) n += m[i] != 0;
  for (int64_t i = 0; i < lp->shape[0]; ++i) {
    g[i] = m[i] ? static_cast<float>(-1.0 / n) : 0.0f;
    if (m[i]) sum += l[i];
  }
  *loss = -sum / n;
  return nullptr;
}

}  // namespace

void check_train(const std::shared_ptr<LoadedPlugin>& p, const ConformanceOptions& o, Checker& c) {
  const areal_train_vtable& vt = *p->train();
  std::string name = "conformance";
  areal_services services = make_services(name);
  std::unique_ptr<PluginInstance> inst;
  c.run("train: create with the given config", [&] {
    inst = std::make_unique<PluginInstance>(p, effective_config(*p, o.config_json), &services);
  });
  if (!inst) return;
  void* self = inst->self();
  Batch batch;
  auto masked_nll = [&](const std::vector<float>& lp) {
    double s = 0, n = 0;
    for (size_t i = 0; i < lp.size(); ++i)
      if (batch.loss_mask.values()[i]) s -= lp[i], n += 1;
    return s / n;
  };

  c.run("train: log-probs have one finite value <= 0 per token, 0 at each sequence start", [&] {
    auto lp = logprobs(vt, self, batch);
    expect(lp.size() == 7, "got " + std::to_string(lp.size()) + " values for 7 tokens");
    for (float v : lp) expect(std::isfinite(v) && v <= 0.0f, "value " + std::to_string(v));
    expect(lp[0] == 0.0f && lp[4] == 0.0f, "sequence starts must hold 0");
  });
  c.run("train: one step on the token NLL lowers it", [&] {
    double before = masked_nll(logprobs(vt, self, batch));
    areal_loss_fn loss{AREAL_OFFSET_OF_END(areal_loss_fn, eval), nullptr, &nll};
    TensorMapBuilder m = batch.map();
    StringCollector stats;
    throw_if_status(vt.train_step(self, m.get(), &loss, stats.writer()), "train_step");
    expect(nlohmann::json::parse(stats.text.empty() ? "{}" : stats.text).is_object(), "stats are not a JSON object");
    double after = masked_nll(logprobs(vt, self, batch));
    expect(after < before, "NLL went from " + std::to_string(before) + " to " + std::to_string(after));
  });
  c.run("train: save then load restores the same log-probs", [&] {
    auto dir = std::filesystem::temp_directory_path() / ("areal-conformance-" + std::to_string(::getpid()));
    const std::string spec = nlohmann::json{{"path", dir.string()}, {"optimizer", true}}.dump();
    auto saved = logprobs(vt, self, batch);
    throw_if_status(vt.save(self, areal_str{spec.data(), spec.size()}), "save");
    areal_loss_fn loss{AREAL_OFFSET_OF_END(areal_loss_fn, eval), nullptr, &nll};
    TensorMapBuilder m = batch.map();
    throw_if_status(vt.train_step(self, m.get(), &loss, nullptr), "train_step");
    throw_if_status(vt.load(self, areal_str{spec.data(), spec.size()}), "load");
    auto loaded = logprobs(vt, self, batch);
    std::filesystem::remove_all(dir);
    for (size_t i = 0; i < saved.size(); ++i) expect(std::fabs(saved[i] - loaded[i]) < 1e-6f, "log-probs differ after load");
  });
  c.run("train: set_version / get_version round-trip", [&] {
    throw_if_status(vt.set_version(self, 42), "set_version");
    int64_t v = 0;
    throw_if_status(vt.get_version(self, &v), "get_version");
    expect(v == 42, "get_version returned " + std::to_string(v));
  });
  // ABI 1.6: a plugin training a LoRA adapter exports it in PEFT's terms
  // (what an engine's load_adapter takes); one training every weight says NOT_FOUND.
  if (vt.struct_size >= AREAL_OFFSET_OF_END(areal_train_vtable, export_adapter) && vt.export_adapter != nullptr) {
    c.run("train: export_adapter gives PEFT's config and a lora_A/lora_B pair per module, or NOT_FOUND", [&] {
      struct Seen {
        int calls = 0;
        nlohmann::json config;
        size_t a = 0, b = 0;
        std::string bad;
      } seen;
      auto fn = [](void* ctx, areal_str config, const areal_tensor_map* m) -> areal_status* {
        auto* s = static_cast<Seen*>(ctx);
        ++s->calls;
        s->config = nlohmann::json::parse(std::string(config.data, config.size), nullptr, false);
        for (size_t i = 0; i < m->count; ++i) {
          const std::string name(m->names[i].data, m->names[i].size);
          const DLTensor& t = *m->tensors[i];
          if (t.ndim != 2 || t.dtype.code != kDLFloat) s->bad = name + " is not a 2-D float tensor";
          if (name.find(".lora_A.weight") != std::string::npos) ++s->a;
          else if (name.find(".lora_B.weight") != std::string::npos) ++s->b;
          else s->bad = "'" + name + "' is not a PEFT lora_A/lora_B name";
        }
        return nullptr;
      };
      const int32_t code = code_of(vt.export_adapter(self, fn, &seen));
      if (code == AREAL_CODE_NOT_FOUND) {
        expect(seen.calls == 0, "export_adapter called fn and then said NOT_FOUND");
        return;
      }
      expect(code == AREAL_CODE_OK, std::string("export_adapter returned ") + code_name(code));
      expect(seen.calls == 1, "fn was called " + std::to_string(seen.calls) + " times");
      expect(seen.config.is_object() && seen.config.contains("r") && seen.config.contains("target_modules"),
             "the config is not PEFT's adapter_config (r, target_modules): " + seen.config.dump());
      expect(seen.bad.empty(), seen.bad);
      expect(seen.a > 0 && seen.a == seen.b, std::to_string(seen.a) + " lora_A and " + std::to_string(seen.b) + " lora_B tensors");
    });
  }
}

}  // namespace areal::conformance
