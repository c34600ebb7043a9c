// fsdp: the training backend on libtorch (plugin kind train).
//
// The model is DecoderModel (shared with local inference). A train step
// splits the packed batch into micro-batches of at most
// `micro_batch_tokens` tokens at sequence boundaries, asks the algorithm's
// loss (areal_loss_fn) for dLoss/dlogprob of each micro-batch, weights each
// micro-batch by its share of loss tokens (so a per-token mean over the
// whole batch comes out exactly), backpropagates, clips, and steps AdamW.
//
// Data parallelism (world_size > 1) shards like FSDP/ZeRO-3: each rank keeps
// a slice of the flat parameters and its AdamW moments (flat_shards,
// sharded_adamw), gathers full parameters for each call, and reduces the
// gradients to their owners (process_group, c10d NCCL or Gloo).
//
// `device` and `dtype` choose where and how it computes; bfloat16/float16
// is mixed precision (float32 master weights and AdamW moments, float32
// log-prob head). The batch arrives as host tensors through the ABI and
// the loss function reads host tensors; the model runs on the device.
#include <ATen/DLConvertor.h>
#include <torch/cuda.h>
#include <torch/utils.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>
#include <memory>
#include <algorithm>
#include <exception>

#include <nlohmann/json.hpp>

#include "areal/sdk.hpp"
#include "areal/sdk_json.hpp"
#include "core/plugin_host/error.hpp"
#include "decoder_model.hpp"
#include "lora_adapter.hpp"
#include "random_state.hpp"
#include "device.hpp"
#include "flat_shards.hpp"
#include "process_group.hpp"
#include "gradient_clip.hpp"
#include "prefix_sharing.hpp"
#include "sharded_adamw.hpp"

namespace {

namespace sdk = areal::sdk;
namespace fsdp = areal::fsdp;
namespace fs = std::filesystem;
using nlohmann::json;

const DLTensor& tensor_named(const areal_tensor_map& m, std::string_view name) {
  for (size_t i = 0; i < m.count; ++i)
    if (sdk::view(m.names[i]) == name) return *m.tensors[i];
  throw sdk::invalid_argument("batch tensor '" + std::string(name) + "' is missing");
}

// A borrowed 1-D CPU DLTensor as a torch tensor (copied: the caller owns the memory).
torch::Tensor from_dl(const DLTensor& t, const std::string& name) {
  if (t.device.device_type != kDLCPU || t.ndim != 1) throw sdk::invalid_argument("'" + name + "' must be a 1-D CPU tensor");
  if (t.strides != nullptr && t.strides[0] != 1) throw sdk::invalid_argument("'" + name + "' must be contiguous");
  torch::Dtype d;
  if (t.dtype.code == kDLInt && t.dtype.bits == 32) d = torch::kInt32;
  else if (t.dtype.code == kDLInt && t.dtype.bits == 64) d = torch::kInt64;
  else if (t.dtype.code == kDLFloat && t.dtype.bits == 32) d = torch::kFloat32;
  else throw sdk::invalid_argument("'" + name + "' has an unsupported dtype");
  return torch::from_blob(static_cast<char*>(t.data) + t.byte_offset, {t.shape[0]}, d).clone();
}

// The batch's "routed_experts" (int16 [T, moe layers, k], -1 where not
// recorded) as an int64 tensor, or undefined when the batch has none.
torch::Tensor routed_experts_of(const areal_tensor_map& m, int64_t T) {
  for (size_t i = 0; i < m.count; ++i) {
    if (sdk::view(m.names[i]) != "routed_experts") continue;
    const DLTensor& t = *m.tensors[i];
    if (t.device.device_type != kDLCPU || t.ndim != 3 || t.strides != nullptr || t.dtype.code != kDLInt || t.dtype.bits != 16 || t.shape[0] != T)
      throw sdk::invalid_argument("'routed_experts' must be a contiguous int16 CPU tensor [T, moe layers, k] with T = len(input_ids)");
    return torch::from_blob(static_cast<char*>(t.data) + t.byte_offset, {t.shape[0], t.shape[1], t.shape[2]}, torch::kInt16).to(torch::kInt64);
  }
  return {};
}

// A 0-d float32 CPU tensor's value (batch-level scalars such as "temperature").
float scalar_float(const DLTensor& t, const std::string& name) {
  if (t.device.device_type != kDLCPU || t.ndim != 0 || t.dtype.code != kDLFloat || t.dtype.bits != 32)
    throw sdk::invalid_argument("'" + name + "' must be a float32 scalar (0-d CPU tensor)");
  const float v = *reinterpret_cast<const float*>(static_cast<const char*>(t.data) + t.byte_offset);
  if (!(v > 0)) throw sdk::invalid_argument("'" + name + "' must be > 0");
  return v;
}

// A 0-d int64 CPU tensor's value, > 0 (batch-level counts such as "total_updates").
int64_t scalar_int64(const DLTensor& t, const std::string& name) {
  if (t.device.device_type != kDLCPU || t.ndim != 0 || t.dtype.code != kDLInt || t.dtype.bits != 64)
    throw sdk::invalid_argument("'" + name + "' must be an int64 scalar (0-d CPU tensor)");
  const int64_t v = *reinterpret_cast<const int64_t*>(static_cast<const char*>(t.data) + t.byte_offset);
  if (v <= 0) throw sdk::invalid_argument("'" + name + "' must be > 0");
  return v;
}

// The DLPack dtype of a floating-point torch tensor.
DLDataType dl_float_type(const torch::Tensor& t) {
  const uint8_t code = t.scalar_type() == torch::kBFloat16 ? static_cast<uint8_t>(kDLBfloat) : static_cast<uint8_t>(kDLFloat);
  return {code, static_cast<uint8_t>(t.element_size() * 8), 1};
}

DLDevice dl_device(const torch::Tensor& t) {
  return t.is_cuda() ? DLDevice{kDLCUDA, static_cast<int32_t>(t.get_device())} : DLDevice{kDLCPU, 0};
}

// Lends contiguous tensors, by name, as an areal_tensor_map for one call of
// `fn`, on the device they are on (a colocated engine on the same GPU copies
// device to device).
void lend(const std::vector<std::string>& names, const std::vector<torch::Tensor>& held, const std::function<void(const areal_tensor_map&)>& fn) {
  std::vector<std::vector<int64_t>> shapes;
  for (const auto& t : held) shapes.emplace_back(t.sizes().begin(), t.sizes().end());
  std::vector<DLTensor> dls(held.size());
  std::vector<DLTensor*> ptrs;
  std::vector<areal_str> strs;
  for (size_t i = 0; i < held.size(); ++i) {
    DLTensor& d = dls[i];
    d.data = held[i].data_ptr();
    d.device = dl_device(held[i]);
    d.ndim = static_cast<int32_t>(shapes[i].size());
    d.dtype = dl_float_type(held[i]);
    d.shape = shapes[i].data();
    ptrs.push_back(&d);
    strs.push_back(areal::sdk::str(names[i]));
  }
  fn(areal_tensor_map{AREAL_OFFSET_OF_END(areal_tensor_map, count), strs.data(), ptrs.data(), ptrs.size()});
}

DLTensor view_of(torch::Tensor& t, int64_t* shape) {  // a 1-D host tensor, for the loss function
  *shape = t.numel();
  DLTensor d{};
  d.data = t.data_ptr();
  d.device = {kDLCPU, 0};
  d.ndim = 1;
  d.dtype = {static_cast<uint8_t>(t.is_floating_point() ? kDLFloat : kDLInt), static_cast<uint8_t>(t.element_size() * 8), 1};
  d.shape = shape;
  return d;
}

class FsdpTrain {
 public:
  static constexpr const char* kName = "fsdp";
  static constexpr const char* kVersion = "0.1.0";
  static constexpr const char* kDescription = "libtorch training engine: packed sequences, AdamW, LR schedules, clipping, checkpoints.";
  static constexpr const char* kConfigSchema = R"({"type": "object", "keys": {
    "model_path": {"type": "string", "format": "path", "doc": "Hugging Face model folder to train (config.json + safetensors); areal-host init-model makes one."},
    "device": {"type": "string", "default": "auto", "doc": "cpu, cuda, cuda:N, or auto (cuda:0 when this build's libtorch has CUDA and a GPU is visible, else cpu). With world_size > 1 on CUDA, rank r uses GPU r modulo the GPUs visible."},
    "dtype": {"type": "string", "enum": ["auto", "bfloat16", "float16", "float32", "float64"], "default": "auto", "doc": "Compute dtype. bfloat16/float16: mixed precision (float32 master weights and AdamW moments, float32 log-prob head); float16 has no loss scaling, prefer bfloat16. float64 for gradient checks. auto: bfloat16 on CUDA, float32 on CPU."},
    "backend": {"type": "string", "enum": ["auto", "nccl", "gloo"], "default": "auto", "doc": "Collectives when world_size > 1: nccl on CUDA when this libtorch has it, gloo otherwise."},
    "lr": {"type": "number", "default": 1e-5, "minimum": 0, "doc": "Peak learning rate."},
    "weight_decay": {"type": "number", "default": 0.0, "minimum": 0, "doc": "AdamW weight decay."},
    "betas": {"type": "array", "items": {"type": "number"}, "default": [0.9, 0.999], "doc": "AdamW betas."},
    "eps": {"type": "number", "default": 1e-8, "minimum": 0, "doc": "AdamW epsilon."},
    "lr_schedule": {"type": "string", "enum": ["constant", "cosine"], "default": "constant", "doc": "Learning-rate schedule after warmup."},
    "warmup_steps": {"type": "integer", "default": 0, "minimum": 0, "doc": "Linear warmup steps."},
    "total_steps": {"type": "integer", "default": null, "minimum": 1, "doc": "Optimizer updates of the cosine schedule (warmup included). null: the run's planned updates, which the host hands over with every batch (trainer.total_steps x trainer.ppo_n_minibatches, or the sft run's steps), so the cosine ends at the run's last step; 1000 if the batch does not say."},
    "min_lr_ratio": {"type": "number", "default": 0.0, "minimum": 0, "maximum": 1, "doc": "Cosine floor as a fraction of lr."},
    "grad_clip": {"type": "number", "default": 1.0, "minimum": 0, "doc": "Clip the global gradient norm to this; 0 disables."},
    "micro_batch_tokens": {"type": "integer", "default": 8192, "minimum": 1, "doc": "Token budget of a micro-batch (whole sequences; a longer sequence forms its own), in train_step and in compute_logprobs alike (the head's float32 logits are tokens x vocabulary: 0.6 MB a token on Qwen3's)."},
    "gradient_checkpointing": {"type": "boolean", "default": false, "doc": "Recompute layer activations in backward to save memory."},
    "prefix_sharing": {"type": "string", "enum": ["auto", "off"], "default": "auto", "doc": "Rows that share token prefixes (a GRPO group's prompt, the turns of a session exported a row per call, retries and branches) computed as one prefix tree, each shared token once, in log-prob recomputation and training (issue #36; docs/algorithms.md, \"Prefix sharing\"). The loss and gradient are those of per-row computation. auto: a micro-batch is a tree when that saves at least a tenth of its tokens, and micro_batch_tokens then counts the tree's tokens (raise it so a whole group fits: 16 samples of an 8k prompt with 300-token replies are 13.0k tree tokens). off: every row computed on its own."},
    "threads": {"type": "integer", "default": 0, "minimum": 0, "doc": "Torch intra-op threads; 0 keeps the default."},
    "batch_invariant": {"type": "boolean", "default": false, "doc": "Compute every token as if it were alone in its batch (fixed-shape chunks, attention in fixed key blocks, the log-prob head by the function the engine records with): log-probs then equal, bit for bit, those a local engine with its own batch_invariant recorded on the same weights, and they do not change with micro-batching or prefix sharing (docs/gpu.md, \"Bitwise mode\"). Slower and more memory for the head; dense models with plain causal attention only."},
    "world_size": {"type": "integer", "default": 1, "minimum": 1, "doc": "Data-parallel ranks; parameters, gradients and optimizer state are sharded across them. `areal-host run` starts this many train-rank processes (docs/scale-out.md); a checkpoint resumes only at the world size that saved it."},
    "rank": {"type": "integer", "default": 0, "minimum": 0, "doc": "This process's rank in [0, world_size); set by the launcher for each rank."},
    "init_method": {"type": "string", "default": "", "doc": "Where the ranks meet when world_size > 1: file:///PATH (a shared file) or tcp://HOST:PORT (rank 0 serves). Empty under `areal-host run`: tcp:// on rank 0's host at a port free there."},
    "timeout_seconds": {"type": "integer", "default": 300, "minimum": 1, "doc": "Collective and rendezvous timeout."},
    "lora": {"type": "object", "default": null, "doc": "Train a LoRA adapter instead of every weight (issue #34), as PEFT's LoraConfig: the base weights are frozen (no gradients, no optimizer state), the adapter is float32 with its own AdamW. Checkpoints and final/ hold the merged model, and in their adapter/ folder the adapter in PEFT's format. After each step the inference engine is handed the adapter alone when it serves adapters (trainer.weight_update auto or adapter), else the merged weights. null: full training.", "keys": {
      "rank": {"type": "integer", "default": 8, "minimum": 1, "doc": "r: the adapter's rank."},
      "alpha": {"type": "number", "default": 16, "minimum": 0, "doc": "lora_alpha: the update is scaled by alpha / rank (alpha / sqrt(rank) with use_rslora)."},
      "dropout": {"type": "number", "default": 0, "minimum": 0, "maximum": 0.99, "doc": "lora_dropout on the adapter's input while training (not when log-probs are recomputed). Masks come from the device's default generator (seeded with lora_seed when the adapter is new); checkpoints with optimizer state keep its state (random_state.rankR-of-W.pt), so a resume draws the masks the uninterrupted run would."},
      "target_modules": {"type": "any", "default": "all-linear", "doc": "\"all-linear\" or a list of q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj (PEFT's names)."},
      "use_rslora": {"type": "boolean", "default": false, "doc": "Rank-stabilised scaling alpha / sqrt(rank)."}}},
    "lora_path": {"type": "string", "format": "path", "default": "", "doc": "With lora: start from this PEFT adapter folder (adapter_config.json + adapter_model.safetensors) instead of a fresh adapter; its own config then applies."},
    "lora_seed": {"type": "integer", "default": 0, "minimum": 0, "doc": "Seed of a fresh adapter's A matrices."},
    "moe": {"type": "object", "default": {}, "doc": "Mixture-of-experts models (qwen3_moe, gpt_oss).", "keys": {
      "aux_loss_coef": {"type": "number", "default": -1, "doc": "Weight of the router's load-balancing loss (HF's load_balancing_loss_func over every MoE layer, added to the algorithm's loss as Qwen3MoeForCausalLM adds it); -1: as HF trains the model, config.json's router_aux_loss_coef (HF's default 0.001) when its output_router_logits is true, else off; 0: off. Reported as moe_aux_loss."},
      "routing_replay": {"type": "string", "enum": ["none", "rollout", "recompute"], "default": "none", "doc": "Which experts the training forwards use (docs/algorithms.md, \"Routing replay\"). none: the trainer's routers choose, as HF does. rollout (R3): the experts the inference engine routed each position to, from the batch's routed_experts (record them with gateway.record_routing / rollout.record_routing); positions not recorded are routed by the trainer; a batch with none is refused. recompute (R2): the experts of the trainer's own first forward of the step (its log-prob recomputation, else a no-grad pass), replayed in the update. The mixing weights always come from the current router, so it still learns."}}}
  }})";

  explicit FsdpTrain(const sdk::CreateContext& ctx) {
    const json c = sdk::parse_object(ctx.config_json(), "fsdp: config");
    if (!c.contains("model_path") || !c["model_path"].is_string()) throw sdk::invalid_argument("fsdp: 'model_path' is required");
    if (c.value("threads", 0) > 0) torch::set_num_threads(c.value("threads", 0));
    const int rank = c.value("rank", 0), world = c.value("world_size", 1);
    try {
      device_ = areal::torch_model::parse_device(c.value("device", std::string("auto")), "fsdp: device");
      if (device_.is_cuda() && world > 1 && c.value("device", std::string("auto")).find(':') == std::string::npos)
        device_ = torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(rank % torch::cuda::device_count()));  // one GPU per rank
      const std::string dtype = c.value("dtype", std::string("auto"));
      dtype_ = dtype == "auto" ? (device_.is_cuda() ? torch::kBFloat16 : torch::kFloat32) : areal::torch_model::parse_dtype(dtype, "fsdp: dtype");
      model_ = std::make_unique<areal::torch_model::DecoderModel>(areal::torch_model::DecoderModel::load(c["model_path"], dtype_, device_));
    } catch (const areal::sdk::Error&) {
      throw;
    } catch (const std::exception& e) {
      throw sdk::invalid_argument(std::string("fsdp: ") + e.what());
    }
    model_path_ = c["model_path"];
    lr_ = c.value("lr", 1e-5);
    schedule_ = c.value("lr_schedule", std::string("constant"));
    warmup_ = c.value("warmup_steps", int64_t{0});
    total_ = c.contains("total_steps") && c["total_steps"].is_number_integer() ? c["total_steps"].get<int64_t>() : 0;  // 0: the run's
    min_lr_ratio_ = c.value("min_lr_ratio", 0.0);
    clip_ = c.value("grad_clip", 1.0);
    micro_tokens_ = c.value("micro_batch_tokens", int64_t{8192});
    checkpointing_ = c.value("gradient_checkpointing", false);
    if (c.value("batch_invariant", false)) {
      try {
        model_->set_batch_invariant(true);
      } catch (const areal::Error& e) {
        throw sdk::Error(e.code(), std::string("fsdp: ") + e.what());
      }
    }
    sharing_ = fsdp::parse_prefix_sharing(c.value("prefix_sharing", std::string("auto")));
    if (model_->config().moe_layer_count() > 0) {
      const json moe = c.contains("moe") && c["moe"].is_object() ? c["moe"] : json::object();
      const double coef = moe.value("aux_loss_coef", -1.0);
      // -1: as HF trains the model - its router_aux_loss_coef only when
      // config.json's output_router_logits is true (gpt-oss ships 0.9 and false).
      aux_loss_coef_ = coef >= 0 ? coef : model_->config().output_router_logits ? model_->config().router_aux_loss_coef : 0.0;
      routing_replay_ = moe.value("routing_replay", std::string("none"));
    }
    const auto betas = c.value("betas", std::vector<double>{0.9, 0.999});
    if (betas.size() != 2) throw sdk::invalid_argument("fsdp: 'betas' needs two numbers");
    group_ = std::make_unique<fsdp::ProcessGroup>(rank, world, c.value("init_method", std::string()), c.value("timeout_seconds", 300), device_,
                                                  c.value("backend", std::string("auto")));
    if (!c.value("lora_path", std::string()).empty() && (!c.contains("lora") || c["lora"].is_null()))
      throw sdk::invalid_argument("fsdp: 'lora_path' starts a LoRA adapter: set 'lora' too (e.g. lora: {}) to train one");
    if (c.contains("lora") && !c["lora"].is_null()) {
      // LoRA: the base is frozen and stays whole on every rank; only the
      // adapter is sharded, reduced and stepped.
      try {
        const std::string from = c.value("lora_path", std::string());
        lora_ = std::make_shared<areal::torch_model::LoraAdapter>(
            from.empty() ? areal::torch_model::LoraAdapter::init(areal::torch_model::LoraConfig::from_json(c["lora"], "fsdp: lora"), model_->config(),
                                                                 c.value("lora_seed", uint64_t{0}), device_)
                         : areal::torch_model::LoraAdapter::load(from, model_->config(), device_));
      } catch (const areal::Error& e) {
        throw sdk::Error(e.code(), e.what());
      }
      for (const auto& t : model_->parameters()) const_cast<torch::Tensor&>(t).set_requires_grad(false);
      lora_->set_training(true);
      model_->set_lora(lora_);
      shards_ = std::make_unique<fsdp::FlatShards>(lora_->parameters(), *group_);
    } else {
      shards_ = std::make_unique<fsdp::FlatShards>(model_->parameters(), *group_);
      // Under mixed precision the master starts from the file's values, not
      // from their bf16/fp16 rounding (as FSDP keeps the original parameters).
      if (shards_->mixed_precision())
        shards_->load_full(areal::torch_model::DecoderModel::load(model_path_, torch::kFloat32, torch::kCPU).parameters());
    }
    fsdp::AdamWOptions ao;
    ao.beta1 = betas[0];
    ao.beta2 = betas[1];
    ao.eps = c.value("eps", 1e-8);
    ao.weight_decay = c.value("weight_decay", 0.0);
    optimizer_ = std::make_unique<fsdp::ShardedAdamW>(shards_->shard(), ao);
  }

  // With world_size > 1 every call below is collective: all ranks make it,
  // each with its own part of the global batch.
  struct Gathered {  // full parameters for the duration of one call
    explicit Gathered(fsdp::FlatShards& s) : s_(s) { s_.gather(); }
    ~Gathered() { s_.release(); }
    fsdp::FlatShards& s_;
  };

  DLManagedTensor* compute_logprobs(const areal_tensor_map& batch, float temperature) {
    torch::NoGradGuard no_grad;
    Gathered full(*shards_);
    const AdapterEval eval(lora_.get());  // no adapter dropout: these are the policy's log-probs
    const torch::Tensor ids = from_dl(tensor_named(batch, "input_ids"), "input_ids");
    const Rows rows = rows_of(ids, from_dl(tensor_named(batch, "cu_seqlens"), "cu_seqlens"));
    areal::torch_model::MoeRouting routing;
    routing.replay = replay_source(batch, ids.size(0));
    routing.record = routing_replay_ == "recompute";
    torch::Tensor lp = whole_batch_logprobs(rows, temperature, &routing).to(torch::kCPU, torch::kFloat32).contiguous();
    // R2: the update of this batch replays what this first pass chose.
    if (routing.record) first_pass_ = {ids, torch::stack(routing.chosen, 1).to(torch::kCPU)}, first_pass_offset_ = 0;
    return at::toDLPack(lp);
  }

  // A batch's token ids and row offsets on the host (micro-batch planning, prefix trees).
  struct Rows {
    std::vector<int32_t> ids;
    std::vector<int64_t> bounds;
  };
  static Rows rows_of(const torch::Tensor& ids, const torch::Tensor& cu) {
    Rows r;
    const torch::Tensor i32 = ids.to(torch::kInt32).contiguous();
    r.ids.assign(i32.data_ptr<int32_t>(), i32.data_ptr<int32_t>() + i32.numel());
    const torch::Tensor c = cu.to(torch::kInt64).contiguous();
    r.bounds.assign(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
    if (r.bounds.size() < 2 || r.bounds.front() != 0 || r.bounds.back() != static_cast<int64_t>(r.ids.size()))
      throw sdk::invalid_argument("cu_seqlens must start at 0 and end at len(input_ids)");
    for (size_t b = 1; b < r.bounds.size(); ++b)
      if (r.bounds[b] < r.bounds[b - 1]) throw sdk::invalid_argument("cu_seqlens must not decrease");
    return r;
  }
  // Per-row log-probs of the whole batch, micro-batch by micro-batch as
  // train_step splits it (a tree where sharing pays). No gradient is kept,
  // but the head's float32 logits are tokens x vocabulary: a whole RL batch
  // in one forward (64k tokens on Qwen3's vocabulary: 39 GB, twice over
  // with the log-softmax) would not fit beside the model. `routing` is the
  // batch's: its replay is read and its chosen experts written by batch row.
  torch::Tensor whole_batch_logprobs(const Rows& rows, float temperature, areal::torch_model::MoeRouting* routing) const {
    std::vector<torch::Tensor> parts;
    std::vector<std::vector<torch::Tensor>> chosen;  // [micro-batch][MoE layer]
    for (const fsdp::MicroBatch& plan : fsdp::plan_micro_batches(rows.ids, rows.bounds, micro_tokens_, sharing_)) {
      const int64_t s = rows.bounds[plan.first], len = rows.bounds[plan.end] - s;
      areal::torch_model::MoeRouting part;
      part.record = routing->record;
      if (routing->replay.defined()) part.replay = areal::torch_model::upload(routing->replay.narrow(0, s, len).contiguous(), device_);
      parts.push_back(fsdp::rows_logprobs(*model_, rows.ids, rows.bounds, plan, temperature, false, &part));
      if (part.record) chosen.push_back(std::move(part.chosen));
    }
    if (parts.empty()) return torch::zeros({0}, torch::kFloat32);
    for (size_t layer = 0; !chosen.empty() && layer < chosen.front().size(); ++layer) {
      std::vector<torch::Tensor> by_part;
      for (const auto& c : chosen) by_part.push_back(c.at(layer));
      routing->chosen.push_back(torch::cat(by_part));
    }
    return parts.size() == 1 ? parts.front() : torch::cat(parts);
  }

  // The experts a forward over `batch` replays (train.moe.routing_replay),
  // [T, moe layers, k] with -1 where the router chooses; undefined: none.
  torch::Tensor replay_source(const areal_tensor_map& batch, int64_t T) const {
    if (routing_replay_ != "rollout") return {};
    torch::Tensor routed = routed_experts_of(batch, T);
    if (!routed.defined())
      throw sdk::invalid_argument(
          "fsdp: train.moe.routing_replay is 'rollout' but the batch has no routed_experts: record the rollout's routing "
          "(gateway.record_routing: true for agents, rollout.record_routing: true for workflows) with an engine that reports it (the local engine)");
    const auto& mc = model_->config();
    if (routed.size(1) != mc.moe_layer_count() || routed.size(2) != mc.num_experts_per_tok)
      throw sdk::invalid_argument("fsdp: routed_experts has " + std::to_string(routed.size(1)) + " layers x top-" + std::to_string(routed.size(2)) +
                                  " but the model routes " + std::to_string(mc.moe_layer_count()) + " layers x top-" + std::to_string(mc.num_experts_per_tok));
    if (routed.numel() > 0 && routed.max().item<int64_t>() >= mc.num_experts)
      throw sdk::invalid_argument("fsdp: routed_experts names expert " + std::to_string(routed.max().item<int64_t>()) + " of a model with " +
                                  std::to_string(mc.num_experts));
    return routed;
  }

  std::string train_step(const areal_tensor_map& batch, const areal_loss_fn& loss) {
    const torch::Tensor ids = from_dl(tensor_named(batch, "input_ids"), "input_ids");
    const torch::Tensor cu = from_dl(tensor_named(batch, "cu_seqlens"), "cu_seqlens").to(torch::kInt64);
    const torch::Tensor mask = from_dl(tensor_named(batch, "loss_mask"), "loss_mask");
    const int64_t T = ids.size(0);
    const Rows rows = rows_of(ids, cu);
    if (mask.size(0) != T) throw sdk::invalid_argument("loss_mask and input_ids differ in length");
    // Micro-batches are weighted by their share of the *global* batch's loss tokens.
    torch::Tensor counts = torch::tensor({mask.ne(0).sum().item<double>(), static_cast<double>(T)}, torch::kFloat64);
    group_->all_reduce_sum(counts);
    const double total_loss_tokens = std::max<double>(1.0, counts[0].item<double>());
    // Per-token tensors the loss may read, sliced per micro-batch.
    // Batch-level scalars (0-d, e.g. "policy_version") go to every micro-batch as they are.
    std::vector<std::pair<std::string, torch::Tensor>> token_tensors;
    std::vector<std::pair<std::string, DLTensor*>> scalars;
    float temperature = 1.0f;
    for (size_t i = 0; i < batch.count; ++i) {
      const std::string name(sdk::view(batch.names[i]));
      if (batch.tensors[i]->ndim == 0) scalars.emplace_back(name, batch.tensors[i]);
      if (name == "temperature") temperature = scalar_float(*batch.tensors[i], name);
      if (name == "total_updates") run_updates_ = scalar_int64(*batch.tensors[i], name);
      if (name == "cu_seqlens" || batch.tensors[i]->ndim != 1) continue;
      const torch::Tensor t = from_dl(*batch.tensors[i], name);
      if (t.size(0) == T) token_tensors.emplace_back(name, t);
    }
    areal::torch_model::reset_peak_memory(device_);
    Gathered full(*shards_);
    // A step starts from no gradients: one that threw part-way (a loss that
    // failed on its second micro-batch) must not leak its sums into this one.
    shards_->discard_gradients();
    torch::Tensor replay = replay_source(batch, T);
    bool replayed_slice = false;  // this step took the next slice of compute_logprobs' pass
    if (routing_replay_ == "recompute") {
      // The first pass's experts when compute_logprobs saw this batch: all of
      // it, or its next minibatch (PPO minibatches are consecutive slices of
      // it, trained after earlier ones moved the weights); else a no-grad pass now.
      const bool next_slice = first_pass_.first.defined() && first_pass_offset_ + T <= first_pass_.first.size(0) &&
                              first_pass_.first.narrow(0, first_pass_offset_, T).equal(ids);
      if (next_slice) {
        replay = first_pass_.second.narrow(0, first_pass_offset_, T);
        first_pass_offset_ += T;
        replayed_slice = true;
      } else {
        torch::NoGradGuard no_grad;
        const AdapterEval eval(lora_.get());
        areal::torch_model::MoeRouting first;
        first.record = true;
        (void)whole_batch_logprobs(rows, temperature, &first);
        replay = torch::stack(first.chosen, 1).to(torch::kCPU);
      }
    }
    // Kept only while its later minibatches may still come.
    if (!replayed_slice || first_pass_offset_ >= first_pass_.first.size(0)) first_pass_ = {}, first_pass_offset_ = 0;
    double loss_sum = 0;
    torch::Tensor aux_total;  // the balancing loss, share-weighted, on the device
    int64_t micro = 0, computed = 0;
    // Whole rows up to the token budget (at least one), each micro-batch a
    // prefix tree where that pays (train.prefix_sharing).
    for (const fsdp::MicroBatch& plan : fsdp::plan_micro_batches(rows.ids, rows.bounds, micro_tokens_, sharing_)) {
      const int64_t s = rows.bounds[plan.first], len = rows.bounds[plan.end] - s;
      const torch::Tensor mcu = cu.narrow(0, plan.first, plan.end - plan.first + 1) - s;
      // MoE: the routers' logits come back for the load-balancing loss.
      areal::torch_model::MoeRouting routing;
      routing.keep_logits = aux_loss_coef_ > 0;
      if (replay.defined()) routing.replay = areal::torch_model::upload(replay.narrow(0, s, len).contiguous(), device_);  // once, not a blocking copy a layer
      torch::Tensor lp = fsdp::rows_logprobs(*model_, rows.ids, rows.bounds, plan, temperature, checkpointing_, &routing);
      computed += plan.computed_tokens;
      torch::Tensor lp_value = lp.detach().to(torch::kCPU, torch::kFloat32).contiguous();  // the ABI carries float32 host tensors
      torch::Tensor grad = torch::zeros({len}, torch::kFloat32);
      std::vector<std::string> names;
      std::vector<torch::Tensor> owned;
      for (const auto& [name, t] : token_tensors) names.push_back(name), owned.push_back(t.narrow(0, s, len).contiguous());
      names.push_back("new_logprobs");
      owned.push_back(lp_value);
      names.push_back("cu_seqlens");
      owned.push_back(mcu.to(torch::kInt32).contiguous());
      std::vector<int64_t> shapes(owned.size());
      std::vector<DLTensor> dls;
      for (size_t i = 0; i < owned.size(); ++i) dls.push_back(view_of(owned[i], &shapes[i]));
      std::vector<DLTensor*> ptrs;
      std::vector<areal_str> strs;
      for (size_t i = 0; i < dls.size(); ++i) ptrs.push_back(&dls[i]), strs.push_back(sdk::str(names[i]));
      for (const auto& [name, t] : scalars) ptrs.push_back(t), strs.push_back(sdk::str(name));
      areal_tensor_map mb{AREAL_OFFSET_OF_END(areal_tensor_map, count), strs.data(), ptrs.data(), ptrs.size()};
      int64_t gshape = len;
      DLTensor gdl = view_of(grad, &gshape);
      double value = 0;
      sdk::throw_if_error(loss.eval(loss.ctx, &mb, &value, &gdl, nullptr));
      if (!std::isfinite(value) || !torch::isfinite(grad).all().item<bool>())
        throw sdk::Error(AREAL_CODE_INVALID_ARGUMENT, "the loss returned a non-finite value or gradient");
      // A per-token mean over this micro-batch, weighted by its share of the batch's loss tokens.
      const double share = std::max<double>(1.0, owned[0].numel() ? mask.narrow(0, s, len).ne(0).sum().item<double>() : 0.0) / total_loss_tokens;
      if (routing.logits.empty()) {
        lp.backward((grad * share).to(lp.device(), lp.scalar_type()));
      } else {
        const auto& mc = model_->config();
        const torch::Tensor aux = areal::torch_model::load_balancing_loss(routing.logits, mc.num_experts, mc.num_experts_per_tok);
        aux_total = aux_total.defined() ? aux_total + aux.detach() * share : aux.detach() * share;  // read once after the loop, not a sync a micro-batch
        torch::autograd::backward({lp, aux * (aux_loss_coef_ * share)}, {(grad * share).to(lp.device(), lp.scalar_type()), torch::Tensor()});
      }
      if (shards_->mixed_precision()) shards_->accumulate_gradients();  // micro-batches sum in float32
      loss_sum += value * share;
      ++micro;
    }
    const double aux_sum = aux_total.defined() ? aux_total.item<double>() : 0.0;
    torch::Tensor grad = shards_->reduce_gradients();  // this rank's slice of the global gradient
    const double local_norm = grad.norm().item<double>();  // no float64 copy of the gradient
    torch::Tensor sums = torch::tensor({local_norm * local_norm, loss_sum, aux_sum, static_cast<double>(computed)}, torch::kFloat64);
    group_->all_reduce_sum(sums);
    const double norm = std::sqrt(sums[0].item<double>());
    const double lr = current_lr();
    // A gradient with an inf or NaN (an overflow in the backward pass; the
    // loss itself was checked above) is not applied: AdamW would write NaN
    // into the master weights and both moments, for good. Every rank reads
    // the same reduced norm, so all skip together; the optimizer's step
    // count (bias correction, the lr schedule) counts applied updates only.
    const bool applied = std::isfinite(norm);
    if (applied) {
      if (const double k = areal::fsdp::clip_coefficient(norm, clip_); k < 1.0) grad.mul_(k);
      ++step_;
      optimizer_->step(shards_->shard(), grad, lr, step_);
      shards_->master_updated();
    } else {
      ++skipped_updates_;
      sdk::log(AREAL_LOG_WARN, "fsdp",
               "the gradient norm is " + std::to_string(norm) + ": this step's update is skipped, the weights and optimizer state are unchanged (" +
                   std::to_string(skipped_updates_) + " skipped so far; dtype float16 has no loss scaling, bfloat16 or float32 avoid most overflows)");
    }
    json stats = {{"loss", sums[1].item<double>()}, {"grad_norm", norm}, {"lr", lr}, {"tokens", counts[1].item<double>()}, {"computed_tokens", sums[3].item<double>()},
                  {"update_skipped", applied ? 0 : 1}, {"skipped_updates", skipped_updates_},
                  {"loss_tokens", total_loss_tokens}, {"micro_batches", micro}, {"step", step_}, {"world_size", group_->world_size()},
                  {"resident_state_bytes", resident_state_bytes()}, {"peak_device_memory_bytes", areal::torch_model::peak_memory_bytes(device_)},
                  {"device", areal::torch_model::device_name(device_)}, {"dtype", areal::torch_model::dtype_name(dtype_)}};
    // The balancing loss (its k when perfectly balanced), share-weighted over micro-batches and ranks.
    if (aux_loss_coef_ > 0) stats["moe_aux_loss"] = sums[2].item<double>();
    return stats.dump();
  }

  // The full weights as DLPack views, by HF name, for an in-memory weight
  // update (collective when world_size > 1: every rank gathers).
  void export_weights(const sdk::WeightsFn& fn) {
    Gathered full(*shards_);
    std::vector<std::string> names;
    std::vector<torch::Tensor> held;
    for (const auto& [name, t] : model_->named_parameters()) {
      names.push_back(name);
      held.push_back(merged(name, t).contiguous());
    }
    lend(names, held, fn);
  }

  // ABI 1.6: the LoRA adapter alone (what the engine's load_adapter takes):
  // megabytes a step instead of the model.
  void export_adapter(const sdk::AdapterFn& fn) {
    if (!lora_) throw sdk::not_found("fsdp trains every weight (no train.lora): there is no adapter to export");
    Gathered full(*shards_);
    std::vector<std::string> names;
    std::vector<torch::Tensor> held;
    // Lent in host memory wherever it trains: an adapter is a few MB, and
    // every taker copies it (the local engine into its own slots, SGLang and
    // vLLM through a PEFT folder) - a GPU trainer beside a remote engine too.
    for (const auto& [name, t] : lora_->named_tensors()) {
      names.push_back(name);
      held.push_back(t.detach().to(torch::kCPU).contiguous());
    }
    const std::string config = lora_->peft_config(model_path_).dump();
    lend(names, held, [&](const areal_tensor_map& m) { fn(config, m); });
  }

  // Rank 0 writes the model folder; every rank writes its optimizer slice.
  void save(std::string_view spec_text) {
    const json spec = sdk::parse_object(spec_text, "save: spec");
    const std::string dir = spec.value("path", std::string());
    if (dir.empty()) throw sdk::invalid_argument("save: 'path' is required");
    {
      std::vector<torch::Tensor> master = shards_->gather_master();  // full precision, whatever the compute dtype
      if (lora_) {  // the merged model (servable as it is) and the adapter beside it
        std::vector<torch::Tensor> adapter = std::move(master);
        master.clear();
        // The whole adapter on every rank (collective; with world_size > 1 a
        // rank holds only its shard between calls), in full precision.
        Gathered full(*shards_);
        {
          const auto& slots = lora_->parameters();
          torch::NoGradGuard no_grad;
          for (size_t i = 0; i < slots.size(); ++i) const_cast<torch::Tensor&>(slots[i]).copy_(adapter[i]);
        }
        // Rank 0 writes; each float32 merge goes to the host at once (a whole
        // float32 copy beside a bf16 model would not fit where LoRA is the way to fit).
        if (group_->rank() == 0) {
          for (const auto& w : model_->config().weights())
            master.push_back(lora_->merged(w.name, model_->p(w.name), torch::kFloat32).to(torch::kCPU));  // DecoderModel::save's order
          lora_->save((fs::path(dir) / "adapter").string(), model_path_);
        }
      }
      if (group_->rank() == 0) {
        model_->save(dir, spec.value("dtype", std::string("float32")), master);
        for (const char* f : {"tokenizer.json", "tokenizer_config.json", "generation_config.json", "special_tokens_map.json"}) {
          const fs::path src = fs::path(model_path_) / f;
          if (fs::exists(src) && !fs::equivalent(fs::path(model_path_), fs::path(dir)))
            fs::copy_file(src, fs::path(dir) / f, fs::copy_options::overwrite_existing);
        }
        std::ofstream(fs::path(dir) / "trainer_state.json")
            << json{{"step", step_}, {"version", version_}, {"world_size", group_->world_size()}}.dump() << "\n";
      }
      group_->barrier();  // the folder exists before other ranks write into it
    }
    if (spec.value("optimizer", false)) {
      optimizer_->save(optimizer_file(dir));
      // Adapter dropout's generator, so the resumed run draws the masks the uninterrupted one would.
      if (lora_draws_random()) areal::torch_model::save_default_generator_state(device_, random_state_file(dir));
    }
    group_->barrier();
  }

  void load(std::string_view spec_text) {
    const json spec = sdk::parse_object(spec_text, "load: spec");
    const std::string dir = spec.value("path", std::string());
    // Optimizer slices are per rank: resuming them takes the world size they were saved with.
    if (std::ifstream st{fs::path(dir) / "trainer_state.json"}; st && spec.value("optimizer", false)) {
      const int saved = json::parse(st).value("world_size", 1);
      if (saved != group_->world_size())
        throw sdk::invalid_argument("load: " + dir + " was saved by " + std::to_string(saved) + " rank(s) and this run has " +
                                    std::to_string(group_->world_size()) + ": resume with train.world_size=" + std::to_string(saved) +
                                    " (its weights alone load at any world size: final/ or train.model_path)");
    }
    const torch::Dtype master = shards_->shard().scalar_type();  // float32 under mixed precision
    if (lora_) {  // the base stays as model_path has it; the adapter resumes from adapter/
      const auto adapter = areal::torch_model::LoraAdapter::load((fs::path(dir) / "adapter").string(), model_->config(), torch::kCPU, master);
      refuse_another_adapter(adapter.config(), dir);
      shards_->load_full(adapter.parameters());
    } else {
      auto loaded = areal::torch_model::DecoderModel::load(dir, master, torch::kCPU);
      shards_->load_full(loaded.parameters());
    }
    if (spec.value("optimizer", false)) {
      const std::string opt = optimizer_file(dir);
      if (!fs::exists(opt)) throw sdk::not_found("load: " + opt + " does not exist (saved without optimizer, or with another world_size?)");
      optimizer_->load(opt);
      if (lora_draws_random()) {
        // Not there (saved without dropout, or by an older areal) or of another device type (a CPU
        // checkpoint resumed on CUDA): the run goes on with other masks, which is all that changes.
        const std::string rs = random_state_file(dir);
        if (const std::string why = areal::torch_model::restore_default_generator_state(device_, rs); !why.empty())
          sdk::log(AREAL_LOG_WARN, "fsdp", "load: " + rs + " " + why + ": the adapter's dropout masks from here differ from an uninterrupted run's");
      }
    }
    std::ifstream state(fs::path(dir) / "trainer_state.json");
    if (state) {
      const json s = json::parse(state);
      step_ = s.value("step", int64_t{0});
      version_ = s.value("version", int64_t{0});
    }
  }

  int64_t version() { return version_; }
  void set_version(int64_t v) { version_ = v; }

 private:
  double current_lr() const {
    const int64_t s = step_ + 1;  // the step about to be taken
    if (warmup_ > 0 && s <= warmup_) return lr_ * static_cast<double>(s) / warmup_;
    if (schedule_ == "constant") return lr_;
    // train.total_steps, else the run's planned updates (the batch's total_updates), else 1000.
    const int64_t total = total_ > 0 ? total_ : run_updates_ > 0 ? run_updates_ : 1000;
    const double progress = std::min(1.0, static_cast<double>(s - warmup_) / std::max<int64_t>(1, total - warmup_));
    return lr_ * (min_lr_ratio_ + (1 - min_lr_ratio_) * 0.5 * (1 + std::cos(M_PI * progress)));
  }

  std::string optimizer_file(const std::string& dir) const {
    return (fs::path(dir) / ("optimizer.rank" + std::to_string(group_->rank()) + "-of-" + std::to_string(group_->world_size()) + ".pt")).string();
  }
  std::string random_state_file(const std::string& dir) const {
    return (fs::path(dir) / ("random_state.rank" + std::to_string(group_->rank()) + "-of-" + std::to_string(group_->world_size()) + ".pt")).string();
  }
  // The checkpoint's adapter must be the one this run trains: its matrices
  // have its rank and targets, and its alpha scales them (dropout may differ:
  // it shapes only the steps to come).
  void refuse_another_adapter(const areal::torch_model::LoraConfig& saved, const std::string& dir) const {
    const areal::torch_model::LoraConfig& now = lora_->config();
    auto describe = [](const areal::torch_model::LoraConfig& c) {
      std::string targets;
      for (size_t m = 0; m < areal::torch_model::kLoraModules; ++m)
        if (c.targets[m]) targets += (targets.empty() ? "" : ",") + std::string(areal::torch_model::lora_module_name(static_cast<areal::torch_model::LoraModule>(m)));
      return "rank " + std::to_string(c.rank) + ", alpha " + json(c.alpha).dump() + (c.use_rslora ? ", use_rslora" : "") + ", targets " + targets;
    };
    if (saved.rank == now.rank && saved.alpha == now.alpha && saved.use_rslora == now.use_rslora && saved.targets == now.targets) return;
    throw sdk::invalid_argument("load: " + dir + "/adapter was trained as (" + describe(saved) + ") but train.lora is now (" + describe(now) +
                                "): resume with the train.lora it was trained with");
  }

  bool lora_draws_random() const { return lora_ && lora_->config().dropout > 0; }
  // What this rank keeps between steps: its weight slice and AdamW moments.
  int64_t resident_state_bytes() const {
    return shards_->shard().numel() * static_cast<int64_t>(shards_->shard().element_size()) + optimizer_->state_bytes();
  }

  // A base weight as the engine gets it: merged with the adapter, if any.
  torch::Tensor merged(const std::string& name, const torch::Tensor& w) const { return lora_ ? lora_->merged(name, w) : w.detach(); }
  // Adapter dropout off for the scope (log-prob recomputation).
  struct AdapterEval {
    explicit AdapterEval(areal::torch_model::LoraAdapter* a) : a_(a) {
      if (a_) a_->set_training(false);
    }
    ~AdapterEval() {
      if (a_) a_->set_training(true);
    }
    areal::torch_model::LoraAdapter* a_;
  };

  std::unique_ptr<areal::torch_model::DecoderModel> model_;
  std::shared_ptr<areal::torch_model::LoraAdapter> lora_;  // train.lora: the adapter trained instead of the weights
  std::unique_ptr<fsdp::ProcessGroup> group_;  // declared before the shards that use it
  std::unique_ptr<fsdp::FlatShards> shards_;
  std::unique_ptr<fsdp::ShardedAdamW> optimizer_;
  torch::Dtype dtype_ = torch::kFloat32;
  torch::Device device_ = torch::kCPU;
  std::string model_path_, schedule_;
  double lr_ = 1e-5, min_lr_ratio_ = 0, clip_ = 1.0;
  int64_t warmup_ = 0, total_ = 0, micro_tokens_ = 8192, step_ = 0, version_ = 0;
  int64_t run_updates_ = 0;  // the batch's total_updates: the run's planned optimizer updates (0: not said)
  int64_t skipped_updates_ = 0;  // steps whose gradient was not finite (not applied)
  std::string routing_replay_ = "none";  // train.moe.routing_replay
  std::pair<torch::Tensor, torch::Tensor> first_pass_;  // recompute: the input ids and experts of the last compute_logprobs
  int64_t first_pass_offset_ = 0;                       // the tokens of it train_steps have replayed (PPO minibatches)
  bool checkpointing_ = false;
  fsdp::PrefixSharing sharing_ = fsdp::PrefixSharing::kAuto;  // train.prefix_sharing
  double aux_loss_coef_ = 0;  // MoE models: weight of the router load-balancing loss
};

}  // namespace

AREAL_EXPORT_TRAIN(FsdpTrain)
