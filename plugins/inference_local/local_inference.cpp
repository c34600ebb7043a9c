// local: the embedded inference backend on libtorch (plugin kind inference).
//
// One scheduler thread owns the model. Each round it admits queued requests
// (up to max_batch active), prefills them together (their prompts packed in
// one forward pass, attention within each prompt, at most max_prefill_tokens
// a pass), and decodes every other active request by one token: all of them
// through every layer as one batch. Each request owns a slot of a shared KV
// cache (kv_cache.hpp), whose capacity grows with the longest request;
// decode attention reads the slots in place (no gather, no copy of the cache
// for grouped-query heads), on CUDA only each row's own keys.
// Sampling runs where the model runs: greedy, temperature, top-k and top-p
// draws for every request of a step at once on the device
// (batched_sampler.hpp), one transfer of [tokens, log-probs] to the host per
// step; rows with logit_bias, penalties or structured output are sampled on
// the host from their row.
// With overlap (on CUDA by default) a decode step stays in flight while the
// host reads and delivers the one before; its input tokens come from that
// step's draws on the device.
// A prompt that begins as another's did (a GRPO group's samples, an
// agent's next turn) takes the keys and values of that prefix from the slot
// holding them (prefix_cache, slot_contents.hpp) and computes only the rest.
// The model is the same DecoderModel the trainer uses, so the log-probs
// reported here are the ones training recomputes. It runs on `device` in
// `dtype`; the log-prob head is float32 and the sampling distribution float64.
#include <torch/cuda.h>
#include <torch/utils.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>
#include <memory>
#include <mutex>
#include <thread>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>
#include <algorithm>
#include <exception>
#include <cstring>
#include <cmath>
#include <stdexcept>
#include <cstdlib>

#include <nlohmann/json.hpp>

#include "core/plugin_host/error.hpp"
#include "core/sampling/sampling.hpp"
#include "core/structured_output/token_mask.hpp"
#include "core/hf/tokenizer/tokenizer.hpp"
#include "areal/sdk.hpp"
#include "areal/sdk_json.hpp"
#include "adapter_registry.hpp"
#include "batched_sampler.hpp"
#include "cuda_graph_cache.hpp"
#include "float_tensor_view.hpp"
#include "kv_cache.hpp"
#include "slot_contents.hpp"
#include "decoder_model.hpp"
#include "device.hpp"
#include "fused_kernels.hpp"

namespace {

namespace sdk = areal::sdk;
namespace fs = std::filesystem;
using nlohmann::json;

struct Request {
  uint64_t id;
  std::vector<int32_t> prompt;
  areal_sampling_params sampling{};
  std::vector<int32_t> stop_ids;
  std::vector<std::string> stop_strings;
  areal_gen_sink sink{};
  std::atomic<bool> aborted{false};
  // Decoding state (scheduler thread only).
  int slot = -1;       // the request's row in the engine's KV cache, while it has one
  int64_t length = 0;  // tokens in the cache
  int32_t last = 0;                              // the token to feed next
  // Launched decode steps with a row for it that the host has not read yet
  // (overlap): while > 0 its next input token is on the device, and
  // generated lags by this many tokens.
  int in_flight = 0;
  int64_t generated = 0, limit = 0;
  areal::sampling::SplitMix64 rng{0};
  std::unique_ptr<areal::tokenizer::IncrementalDecoder> decoder;
  std::string text;
  int32_t finish = 0;  // areal_finish_reason once decided
  std::string error;   // with AREAL_FINISH_ERROR: why
  // What reshapes the distribution besides temperature (ABI 1.3).
  std::vector<std::pair<int32_t, float>> logit_bias;
  std::unordered_map<int32_t, int32_t> generated_counts;  // for frequency/presence penalties
  std::optional<areal::structured_output::JsonMatcher> matcher;
  const areal::structured_output::VocabularyTrie* trie = nullptr;  // the engine's, with a matcher
  int64_t min_new = 0;  // stop ids, EOS and stop strings held back until this many tokens (the engine's min_new_tokens)
  // The LoRA adapter it runs with (ABI 1.6; empty name: the base model),
  // looked up again before every step so a replaced adapter takes effect.
  std::string adapter_name;
  std::shared_ptr<const areal::local_inference::ServedAdapter> adapter;
  // ABI 1.7: the experts each position was routed to (MoE models, when the
  // request asked): [positions][moe layers][top k], flattened.
  bool record_routing = false;
  std::vector<uint16_t> routing;
  bool reshaped() const {
    return !logit_bias.empty() || sampling.frequency_penalty != 0 || sampling.presence_penalty != 0 || matcher.has_value() ||
           generated + in_flight < min_new;
  }
};


// The ids that end a reply: config.json's eos_token_id (one or a list) and
// generation_config.json's, which is where HF generate and vLLM take them
// from (Qwen2.5/Qwen3 instruct list <|endoftext|> there only; Llama 3's
// <|eot_id|> is not in every config.json). Ids outside the vocabulary are left out.
std::vector<int64_t> end_of_sequence_ids(const std::string& model_dir, const areal::model::ModelConfig& config) {
  std::vector<int64_t> ids = config.eos_token_ids;
  std::ifstream in(fs::path(model_dir) / "generation_config.json");
  const nlohmann::json g = in ? nlohmann::json::parse(in, nullptr, false) : nlohmann::json();
  if (g.is_object() && g.contains("eos_token_id")) {
    const nlohmann::json& e = g["eos_token_id"];
    for (const auto& id : e.is_array() ? e : nlohmann::json::array({e}))
      if (id.is_number_integer()) ids.push_back(id.get<int64_t>());
  }
  std::vector<int64_t> out;
  for (int64_t id : ids)
    if (id >= 0 && id < config.vocab_size && std::find(out.begin(), out.end(), id) == out.end()) out.push_back(id);
  return out;
}

class LocalInference {
 public:
  static constexpr const char* kName = "local";
  static constexpr const char* kVersion = "0.1.0";
  static constexpr const char* kDescription =
      "Embedded libtorch inference: batched decoding with KV caches over the training model's code. Honours "
      "frequency_penalty, presence_penalty, logit_bias and structured output (JSON object / JSON Schema, by masking "
      "the tokens that cannot continue a valid output); log-probs are those of the distribution actually sampled from. Serves "
      "LoRA adapters beside the base model without merging them: each request names one (or none), and requests of "
      "different adapters and of the base share one batch.";
  static constexpr const char* kConfigSchema = R"({"type": "object", "keys": {
    "model_path": {"type": "string", "format": "path", "doc": "Hugging Face model folder (config.json, safetensors, tokenizer files)."},
    "model": {"type": "string", "default": "", "doc": "Model name reported by info; empty: the folder name."},
    "device": {"type": "string", "default": "auto", "doc": "cpu, cuda, cuda:N, or auto (cuda:0 when this build's libtorch has CUDA and a GPU is visible, else cpu)."},
    "dtype": {"type": "string", "enum": ["auto", "bfloat16", "float16", "float32", "float64"], "default": "auto", "doc": "Compute dtype (the log-prob head is float32 at least). auto: bfloat16 on CUDA, float32 on CPU."},
    "max_batch": {"type": "integer", "default": 8, "minimum": 1, "maximum": 1024, "doc": "Requests decoded together."},
    "max_context": {"type": "integer", "default": 0, "minimum": 0, "doc": "Prompt plus output limit; 0: the model's max_position_embeddings."},
    "cuda_graphs": {"type": "boolean", "default": true, "doc": "On CUDA, decode steps replay CUDA graphs captured once per step shape (slot rows rounded up to a few sizes, and cached keys too where the flash kernel does not read each row's own count); false: every kernel launched from the host. Ignored on CPU and for MoE models (their routing counts each expert's tokens on the host every step)."},
    "min_new_tokens": {"type": "integer", "default": 0, "minimum": 0, "doc": "Stop ids and EOS are masked, and stop strings not matched, until a reply has this many tokens (vLLM's min_tokens, for every request). For random-weight test models whose end-of-turn logit is raised (init-model --end-turn-logit): with 1, a client sending temperature 0 gets a one-token reply instead of an empty one. The recorded log-probs are those of the masked distribution."},
    "max_prefill_tokens": {"type": "integer", "default": 16384, "minimum": 1, "doc": "Prompt tokens prefilled together in one forward pass (newly admitted requests are packed up to this; a longer prompt goes alone)."},
    "prefix_cache": {"type": "boolean", "default": true, "doc": "A prompt that begins as an earlier one did (the n samples of a GRPO group, an agent's next turn resending the conversation) copies that prefix's keys and values from the cache slot holding them and computes only the rest; slots keep their rows after their request ends until another takes them (the cache then stays allocated while idle). Rows count only for the same adapter and weights; requests recording MoE routing compute their whole prompt. info() reports prompt_tokens, cached_tokens and hit_rate."},
    "logprob_mode": {"type": "string", "enum": ["sampling", "raw"], "default": "sampling", "doc": "sampling: log-probs of softmax(logits / temperature), the ABI's convention and what training recomputes. raw: temperature-1 log-probs, which break that convention; only for test servers that emulate vLLM's or SGLang's raw mode."},
    "overlap": {"type": "string", "enum": ["auto", "on", "off"], "default": "auto", "doc": "Whether the host reads a decode step's tokens while the device computes the next step (one step in flight ahead), so the host's work per step (delivering tokens, stop checks, queuing the next step) hides behind the GPU's instead of leaving it idle. A request that ends on a stop token or string has then had one more row computed and dropped. Steps with a row sampled on the host (penalties, logit_bias, structured output), recording MoE routing, or in batch_invariant mode are read before the next is queued. auto: on with CUDA, off on CPU (where kernels run as they are called, so nothing overlaps). on: also on CPU (tests)."},
    "decode_kernels": {"type": "boolean", "default": true, "doc": "On CUDA in bfloat16/float16, each decode layer's per-head norms, RoPE and KV-cache writes run as one of areal's own kernels, and silu(gate) * up as another, where libtorch takes about ten (a small model's decode step is bound by its kernel count). Each is checked against its libtorch computation on the device at start and left out, with a line on stderr, if it differs; they round as libtorch does, up to the order of float32 sums. Needs a build with nvcc (docs/gpu.md); ignored on CPU and in batch_invariant mode. false: libtorch's kernels only (to measure what they gain)."},
    "threads": {"type": "integer", "default": 0, "minimum": 0, "doc": "Torch intra-op threads; 0 keeps the default."},
    "batch_invariant": {"type": "boolean", "default": false, "doc": "Compute every token as if it were alone in its batch (fixed-shape chunks, attention in fixed key blocks): the recorded log-probs then equal, bit for bit, those the fsdp trainer recomputes with its own batch_invariant on the same weights (docs/gpu.md, \"Bitwise mode\"). Slower, and decode steps run without CUDA graphs; dense models with plain causal attention only. Log-probs of rows sampled on the host (penalties, logit_bias, structured output) are those of their reshaped distribution as always."},
    "adapters": {"type": "object", "default": {}, "doc": "LoRA adapters loaded at start, name -> PEFT adapter folder (adapter_config.json + adapter_model.safetensors), each at version 0. Requests choose one by name (the OpenAI 'model' field through the gateway); more can be loaded and replaced while serving (load_adapter)."}
  }})";

  explicit LocalInference(const sdk::CreateContext& ctx) {
    const json c = sdk::parse_object(ctx.config_json(), "local: config");
    if (!c.contains("model_path") || !c["model_path"].is_string()) throw sdk::invalid_argument("local: 'model_path' is required");
    if (c.value("threads", 0) > 0) torch::set_num_threads(c.value("threads", 0));
    path_ = c["model_path"];
    try {
      device_ = areal::torch_model::parse_device(c.value("device", std::string("auto")), "local: device");
      const std::string dtype = c.value("dtype", std::string("auto"));
      dtype_ = dtype == "auto" ? (device_.is_cuda() ? torch::kBFloat16 : torch::kFloat32) : areal::torch_model::parse_dtype(dtype, "local: dtype");
      model_ = std::make_unique<areal::torch_model::DecoderModel>(areal::torch_model::DecoderModel::load(path_, dtype_, device_));
      invariant_ = c.value("batch_invariant", false);
      if (invariant_) {
        try {
          model_->set_batch_invariant(true);
        } catch (const areal::Error& e) {
          throw sdk::Error(e.code(), std::string("local: ") + e.what());
        }
      }
      if (fs::exists(fs::path(path_) / "tokenizer.json")) tokenizer_ = areal::tokenizer::Tokenizer::from_dir(path_);
    } catch (const sdk::Error&) {
      throw;
    } catch (const std::exception& e) {
      throw sdk::invalid_argument(std::string("local: ") + e.what());
    }
    for (const auto& [name, p] : model_->named_parameters()) const_cast<torch::Tensor&>(p).set_requires_grad(false);
    // Serving layout: q/k/v and gate/up as one product each, the float32 head
    // kept (batch-invariant mode computes what the trainer does: separate products).
    if (!invariant_) model_->join_projections();
    model_->keep_float32_head();
    model_->use_decode_kernels(!invariant_ && c.value("decode_kernels", true));
    name_ = c.value("model", std::string());
    if (name_.empty()) name_ = fs::path(path_).filename().string();
    max_batch_ = c.value("max_batch", 8);
    max_prefill_tokens_ = c.value("max_prefill_tokens", int64_t{16384});
    prefix_cache_ = c.value("prefix_cache", true);
    contents_ = std::make_unique<areal::local_inference::SlotContents>(max_batch_);
    min_new_tokens_ = c.value("min_new_tokens", int64_t{0});
    // Not for MoE models: their routing counts each expert's tokens on the
    // host every step (the experts' shapes follow), which a graph cannot hold.
    graphs_on_ = c.value("cuda_graphs", true) && device_.is_cuda() && !invariant_ && model_->config().moe_layer_count() == 0 &&
                 areal::local_inference::CudaGraphCache::available();
    graphs_.set_device(device_);
    read_fault_hook();
    const std::string overlap = c.value("overlap", std::string("auto"));
    if (overlap != "auto" && overlap != "on" && overlap != "off") throw sdk::invalid_argument("local: overlap must be auto, on or off");
    overlap_ = !invariant_ && (overlap == "on" || (overlap == "auto" && device_.is_cuda()));
    decode_inputs_ = torch::zeros({4, max_batch_}, torch::TensorOptions().dtype(torch::kInt64).device(device_));
    next_tokens_ = torch::zeros({max_batch_}, torch::TensorOptions().dtype(torch::kInt64).device(device_));
    raw_logprobs_ = c.value("logprob_mode", std::string("sampling")) == "raw";
    max_context_ = c.value("max_context", int64_t{0});
    if (max_context_ == 0) max_context_ = model_->config().max_position_embeddings;
    end_ids_ = end_of_sequence_ids(path_, model_->config());
    for (int s = max_batch_ - 1; s >= 0; --s) free_slots_.push_back(s);
    // max_batch slots and the spare one that rows without a request write to.
    const auto& mc = model_->config();
    cache_ = std::make_unique<areal::local_inference::KvCache>(max_batch_ + 1, mc.num_hidden_layers, mc.num_key_value_heads, mc.head_dim, max_context_,
                                                               dtype_, device_);
    adapters_ = std::make_unique<areal::local_inference::AdapterRegistry>(model_->config(), device_);
    if (c.contains("adapters")) {
      if (!c["adapters"].is_object()) throw sdk::invalid_argument("local: 'adapters' must be an object, name -> PEFT adapter folder");
      for (const auto& [name, dir] : c["adapters"].items()) {
        if (!dir.is_string()) throw sdk::invalid_argument("local: adapters." + name + " must be a folder path");
        adapters_->load(json{{"name", name}, {"version", 0}, {"path", dir}}.dump(), nullptr);
      }
    }
    // The peak info() reports counts from here: what ran before in this
    // process (a benchmark's training) is not this engine's. A colocated
    // trainer resets it at each step, so there both numbers cover both.
    areal::torch_model::reset_peak_memory(device_);
    thread_ = sdk::guarded_thread("local", [this] { schedule(); });
  }

  ~LocalInference() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    cv_.notify_all();
    thread_.join();
    // A destructor must not throw: each sink is contained.
    auto abort_all = [](auto& requests) {
      for (auto& r : requests) sdk::contain("local", [&] { r->sink.on_done(r->sink.ctx, AREAL_FINISH_ABORT, nullptr); });
    };
    abort_all(queue_);
    abort_all(active_);
  }

  void submit(const areal_gen_request& req, const areal_gen_sink& sink) {
    if (req.input_ids == nullptr || req.input_ids_count == 0) throw sdk::invalid_argument("input_ids must not be empty");
    if (req.sampling == nullptr) throw sdk::invalid_argument("sampling params are required");
    if (sink.on_tokens == nullptr || sink.on_done == nullptr) throw sdk::invalid_argument("sink callbacks are required");
    auto r = std::make_shared<Request>();
    r->id = req.request_id;
    r->prompt.assign(req.input_ids, req.input_ids + req.input_ids_count);
    std::memcpy(&r->sampling, req.sampling, std::min<size_t>(req.sampling->struct_size, sizeof r->sampling));
    const auto& s = r->sampling;
    if (s.max_new_tokens <= 0) throw sdk::invalid_argument("max_new_tokens must be > 0");
    if (!(s.temperature >= 0) || std::isinf(s.temperature)) throw sdk::invalid_argument("temperature must be a number >= 0");
    if (!(s.top_p > 0 && s.top_p <= 1)) throw sdk::invalid_argument("top_p must be in (0, 1]");  // NaN too
    for (int32_t id : r->prompt)
      if (id < 0 || id >= model_->config().vocab_size) throw sdk::invalid_argument("input id " + std::to_string(id) + " is outside the vocabulary");
    if (static_cast<int64_t>(r->prompt.size()) >= max_context_)
      throw sdk::invalid_argument("prompt of " + std::to_string(r->prompt.size()) + " tokens leaves no room in max_context " + std::to_string(max_context_));
    if (s.stop_token_ids) r->stop_ids.assign(s.stop_token_ids, s.stop_token_ids + s.stop_token_ids_count);
    for (int32_t id : r->stop_ids)
      if (id < 0 || id >= model_->config().vocab_size) throw sdk::invalid_argument("stop token id " + std::to_string(id) + " is outside the vocabulary");
    // The other end-of-sequence ids end a reply as the config's first does.
    if (!s.ignore_eos)
      for (int64_t id : end_ids_)
        if (id != model_->config().eos_token_id && std::find(r->stop_ids.begin(), r->stop_ids.end(), id) == r->stop_ids.end())
          r->stop_ids.push_back(static_cast<int32_t>(id));
    for (size_t i = 0; s.stop_strings && i < s.stop_strings_count; ++i) r->stop_strings.emplace_back(sdk::view(s.stop_strings[i]));
    if (!r->stop_strings.empty()) {
      if (!tokenizer_) throw sdk::unsupported("stop strings need tokenizer.json in the model folder");
      r->decoder = std::make_unique<areal::tokenizer::IncrementalDecoder>(tokenizer_, false);
    }
    r->sampling.stop_token_ids = nullptr;
    r->sampling.stop_strings = nullptr;
    reshaping(*r);
    r->rng.state = s.has_seed ? s.seed : r->id * 0x9e3779b97f4a7c15ULL;
    r->limit = std::min<int64_t>(s.max_new_tokens, max_context_ - static_cast<int64_t>(r->prompt.size()));
    r->min_new = s.ignore_eos ? 0 : min_new_tokens_;
    if (req.struct_size >= AREAL_OFFSET_OF_END(areal_gen_request, adapter) && req.adapter.size > 0) {
      r->adapter_name.assign(sdk::view(req.adapter));
      r->adapter = adapters_->find(r->adapter_name);
      if (!r->adapter) throw sdk::not_found("no adapter '" + r->adapter_name + "' is loaded");
    } else if (std::string policy = adapters_->default_name(); !policy.empty()) {
      r->adapter = adapters_->find(policy);  // a trainer's policy adapter serves requests that name none
      if (r->adapter) r->adapter_name = std::move(policy);
    }
    r->record_routing = req.struct_size >= AREAL_OFFSET_OF_END(areal_gen_request, record_routing) && req.record_routing != 0 &&
                        model_->config().moe_layer_count() > 0;
    r->sink = sink;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stopping_) throw sdk::unavailable("local inference is shutting down");
      if (ids_.count(r->id)) throw sdk::Error(AREAL_CODE_ALREADY_EXISTS, "request id " + std::to_string(r->id) + " is already in flight");
      ids_.insert(r->id);
      queue_.push_back(r);
    }
    cv_.notify_all();
  }

  void abort(uint64_t id) {
    std::shared_ptr<Request> queued;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!ids_.count(id)) throw sdk::not_found("no request " + std::to_string(id) + " in flight");
      for (auto it = queue_.begin(); it != queue_.end(); ++it)
        if ((*it)->id == id) {
          queued = *it;
          queue_.erase(it);
          ids_.erase(id);
          break;
        }
      for (auto& r : active_)
        if (r->id == id) {
          // Ends at the end of the scheduler's round; a step already in
          // flight may still deliver one token before on_done(ABORT).
          r->aborted = true;
          aborts_waiting_ = true;
        }
    }
    cv_.notify_all();
    if (queued) queued->sink.on_done(queued->sink.ctx, AREAL_FINISH_ABORT, nullptr);
  }

  void pause() {
    std::lock_guard<std::mutex> lock(mutex_);
    paused_ = true;
  }
  void resume() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      paused_ = false;
    }
    cv_.notify_all();
  }

  // Copies and checks the ABI 1.3 fields (zero when the host is older).
  void reshaping(Request& r) {
    auto& s = r.sampling;
    const int32_t vocab = model_->config().vocab_size;
    for (float p : {s.frequency_penalty, s.presence_penalty})
      if (!(p >= -2 && p <= 2)) throw sdk::invalid_argument("frequency_penalty and presence_penalty must be in [-2, 2]");
    for (size_t i = 0; s.logit_bias && i < s.logit_bias_count; ++i) {
      const auto& b = s.logit_bias[i];
      if (b.token_id < 0 || b.token_id >= vocab) throw sdk::invalid_argument("logit_bias names token " + std::to_string(b.token_id) + ", outside the vocabulary");
      if (!(b.bias >= -100 && b.bias <= 100)) throw sdk::invalid_argument("logit_bias values must be in [-100, 100]");
      r.logit_bias.emplace_back(b.token_id, b.bias);
    }
    s.logit_bias = nullptr;
    if (s.structured_output == AREAL_STRUCTURED_JSON_OBJECT) {
      r.matcher.emplace(areal::structured_output::Schema::any_object());
    } else if (s.structured_output == AREAL_STRUCTURED_JSON_SCHEMA) {
      const std::string_view text = sdk::view(s.json_schema);
      const json schema = json::parse(text.begin(), text.end(), nullptr, false);
      if (schema.is_discarded()) throw sdk::invalid_argument("json_schema is not JSON");
      try {
        r.matcher.emplace(areal::structured_output::Schema::compile(schema));
      } catch (const areal::Error& e) {
        throw sdk::invalid_argument(e.what());
      }
    } else if (s.structured_output != AREAL_STRUCTURED_NONE) {
      throw sdk::invalid_argument("unknown structured_output " + std::to_string(s.structured_output));
    }
    s.json_schema = {};
    if (r.matcher) r.trie = &vocabulary_trie();  // built once, before the request runs
  }

  // The vocabulary as a byte trie for structured output, built at first use.
  const areal::structured_output::VocabularyTrie& vocabulary_trie() {
    std::lock_guard<std::mutex> lock(trie_mutex_);
    if (!trie_) {
      if (!tokenizer_ || !tokenizer_->byte_level_decoding())
        throw sdk::unsupported("structured output needs a byte-level tokenizer.json in the model folder");
      std::vector<std::string> bytes(model_->config().vocab_size);
      for (size_t id = 0; id < bytes.size() && id < tokenizer_->vocab_size(); ++id)
        if (!tokenizer_->is_special(static_cast<int32_t>(id))) bytes[id] = tokenizer_->token_bytes(static_cast<int32_t>(id));
      trie_ = std::make_unique<areal::structured_output::VocabularyTrie>(bytes);
    }
    return *trie_;
  }

  void update_weights(std::string_view spec_text) {
    const json spec = sdk::parse_object(spec_text, "update_weights: spec");
    if (spec.value("type", "") != "disk")
      throw sdk::unsupported("local inference updates weights from disk: {\"type\": \"disk\", \"path\": DIR, \"version\": N}");
    if (!spec.contains("path") || !spec.contains("version") || !spec["version"].is_number_integer())
      throw sdk::invalid_argument("update_weights: 'path' and integer 'version' are required");
    // Read on the host, then copied in: a second copy of the weights never sits on the GPU.
    auto fresh = areal::torch_model::DecoderModel::load(spec["path"].get<std::string>(), dtype_, torch::kCPU);
    check_same_computation(fresh);  // before anything is copied: a refused update leaves the served weights whole
    // Between two decode steps: the scheduler holds the lock while stepping.
    const StepWaiter waiting(*this);
    std::lock_guard<std::mutex> step(step_mutex_);
    quiesce_device();
    torch::NoGradGuard no_grad;
    for (const auto& [name, t] : fresh.named_parameters()) const_cast<torch::Tensor&>(model_->p(name)).copy_(t);
    model_->keep_float32_head();
    contents_->invalidate();  // cached rows are of the old weights
    std::lock_guard<std::mutex> lock(mutex_);
    version_ = spec["version"].get<int64_t>();
  }

  // Whether weights read from disk compute what the served model computes
  // with new values: the same config (up to keys that change no result:
  // initializer_range, torch_dtype, the bos/eos ids, max_position_embeddings,
  // use_cache) and the same parameter names and shapes. Otherwise the update
  // is refused whole: copying until the first mismatch would leave a mix.
  void check_same_computation(const areal::torch_model::DecoderModel& fresh) const {
    auto computing = [](json j) {
      for (const char* k : {"initializer_range", "torch_dtype", "bos_token_id", "eos_token_id", "max_position_embeddings", "use_cache"}) j.erase(k);
      return j;
    };
    const json now = computing(model_->config().to_hf_json()), next = computing(fresh.config().to_hf_json());
    std::string differ;
    for (const auto& [key, value] : now.items())
      if (!next.contains(key) || next[key] != value) differ += (differ.empty() ? "" : ", ") + key + " (" + value.dump() + " served, " + (next.contains(key) ? next[key].dump() : "absent") + " new)";
    for (const auto& [key, value] : next.items())
      if (!now.contains(key)) differ += (differ.empty() ? "" : ", ") + key + " (absent served, " + value.dump() + " new)";
    if (!differ.empty()) throw sdk::invalid_argument("update_weights: the new weights are for a different architecture: " + differ);
    const auto& served = model_->named_parameters();
    for (const auto& [name, t] : fresh.named_parameters()) {
      auto it = served.find(name);
      if (it == served.end()) throw sdk::invalid_argument("update_weights: the new weights have '" + name + "', which the served model does not");
      if (it->second.sizes() != t.sizes()) throw sdk::invalid_argument("update_weights: '" + name + "' has the wrong shape");
    }
    if (fresh.named_parameters().size() != served.size()) throw sdk::invalid_argument("update_weights: the new weights lack some of the served model's tensors");
  }

  // In-memory weight update from an in-process trainer (ABI 1.1): every
  // parameter by HF name, checked before anything is copied.
  void update_weights_from_tensors(const areal_tensor_map& weights, int64_t version) {
    std::map<std::string, const DLTensor*> by_name;
    for (size_t i = 0; i < weights.count; ++i) by_name[std::string(sdk::view(weights.names[i]))] = weights.tensors[i];
    std::vector<std::pair<torch::Tensor, torch::Tensor>> copies;  // (destination, source view)
    for (const auto& [name, param] : model_->named_parameters()) {
      auto it = by_name.find(name);
      if (it == by_name.end()) throw sdk::invalid_argument("update_weights_from_tensors: tensor '" + name + "' is missing");
      torch::Tensor src = areal::local_inference::float_tensor_view(*it->second, "update_weights_from_tensors: '" + name + "'");
      if (src.sizes() != param.sizes()) throw sdk::invalid_argument("update_weights_from_tensors: '" + name + "' has the wrong shape");
      copies.emplace_back(param, std::move(src));
    }
    // Between two decode steps, all at once.
    const StepWaiter waiting(*this);
    std::lock_guard<std::mutex> step(step_mutex_);
    quiesce_device();
    torch::NoGradGuard no_grad;
    for (auto& [dst, src] : copies) const_cast<torch::Tensor&>(dst).copy_(src);
    model_->keep_float32_head();
    contents_->invalidate();  // cached rows are of the old weights
    std::lock_guard<std::mutex> lock(mutex_);
    version_ = version;
  }

  int64_t version() {
    std::lock_guard<std::mutex> lock(mutex_);
    return version_;
  }
  void set_version(int64_t v) {
    std::lock_guard<std::mutex> lock(mutex_);
    version_ = v;
  }
  std::string info() {
    const auto& c = model_->config();
    return json{{"model", name_},
                {"family", c.family},
                {"vocab_size", c.vocab_size},
                {"max_context", max_context_},
                {"eos_token_id", c.eos_token_id},
                {"device", areal::torch_model::device_name(device_)},
                {"dtype", areal::torch_model::dtype_name(dtype_)},
                {"peak_device_memory_bytes", areal::torch_model::peak_memory_bytes(device_)},
                {"cuda_graphs", graphs_on_.load()},
                {"overlap", overlap_},
                // Which of libtorch's CUDA-only kernels this engine runs (torch_model/fused_kernels.hpp).
                {"fused_kernels", json{{"varlen_flash_attention", areal::torch_model::fused::varlen_attention_applies(device_, dtype_, c.head_dim)},
                                       {"flash_decode_attention", !invariant_ && areal::torch_model::fused::cached_attention_applies(device_, dtype_, c.head_dim)},
                                       {"bf16_float32_head_product", areal::torch_model::fused::float32_product_applies(device_, dtype_)}}},
                // areal's own (torch_model/decode_kernels.hpp): whether this engine's decode step runs them.
                {"decode_kernels", model_->decode_kernels()},
                {"batch_invariant", invariant_},
                {"decode_steps", decode_steps_.load()},
                {"prefix_cache", json{{"enabled", prefix_cache_}, {"prompt_tokens", prompt_tokens_.load()}, {"cached_tokens", cached_tokens_.load()},
                                      {"hit_rate", prompt_tokens_.load() > 0 ? static_cast<double>(cached_tokens_.load()) / prompt_tokens_.load() : 0.0}}},
                {"adapters", true},
                {"loaded_adapters", adapters_->describe()},
                // ABI 1.7: a mixture-of-experts model reports its routing when a request asks.
                {"routing", c.moe_layer_count() > 0}}
        .dump();
  }

  // ABI 1.6: LoRA adapters served beside the base weights.
  void load_adapter(std::string_view spec, const areal_tensor_map* tensors) { adapters_->load(spec, tensors); }
  void unload_adapter(std::string_view name) { adapters_->unload(name); }

 private:
  // Before weights are written in place: a decode step the scheduler left
  // in flight (overlap; an update that arrived mid-round) has finished on
  // the device, whichever stream the writer's copies go to. Its tokens
  // carry the version it was queued with.
  void quiesce_device() {
    if (device_.is_cuda()) torch::cuda::synchronize(device_.index());  // this engine's GPU, whatever the calling thread's current one
  }

  // Room for `tokens` keys in every slot; graphs that captured the old
  // cache's addresses are dropped when it grows.
  void ensure_capacity(int64_t tokens) {
    if (cache_->reserve(tokens)) graphs_.clear();
  }

  // Routes a step's rows to the requests' adapters: each request's adapter
  // is looked up again (one replaced by load_adapter takes effect from this
  // step on), and `rows_of(i, rows)` appends request i's activation rows.
  // The returned guard says whether any row has an adapter; the routing
  // lasts until it goes.
  struct AdapterRouting {
    areal::torch_model::DecoderModel* model;
    bool any;
    AdapterRouting(areal::torch_model::DecoderModel* m, bool a) : model(m), any(a) {}
    AdapterRouting(const AdapterRouting&) = delete;
    AdapterRouting& operator=(const AdapterRouting&) = delete;
    ~AdapterRouting() {
      if (any) model->set_lora_rows({});
    }
  };
  template <class RowsOf>
  AdapterRouting route_adapters(const std::vector<Request*>& reqs, RowsOf rows_of) {
    std::map<const areal::local_inference::ServedAdapter*, std::pair<std::shared_ptr<const areal::local_inference::ServedAdapter>, std::vector<int64_t>>> groups;
    for (size_t i = 0; i < reqs.size(); ++i) {
      Request& r = *reqs[i];
      if (r.adapter_name.empty()) continue;
      if (auto now = adapters_->find(r.adapter_name)) r.adapter = std::move(now);  // unloaded: it finishes with the one it had
      auto& g = groups[r.adapter.get()];
      g.first = r.adapter;
      rows_of(i, g.second);
    }
    if (!groups.empty()) {
      std::vector<areal::torch_model::DecoderModel::LoraRows> rows;
      for (auto& [key, g] : groups) rows.push_back({g.first->lora, areal::torch_model::upload(torch::tensor(g.second, torch::kInt64), device_)});
      model_->set_lora_rows(std::move(rows));
    }
    return AdapterRouting{model_.get(), !groups.empty()};
  }

  // The adapter a request runs with now (one replaced by load_adapter takes
  // effect from this step on; one unloaded stays until the request ends).
  void refresh_adapter(Request& r) {
    if (r.adapter_name.empty()) return;
    if (auto now = adapters_->find(r.adapter_name)) r.adapter = std::move(now);
  }

  // Prefills newly admitted requests. Those whose prompt shares more with an
  // earlier one of this round than with any slot's rows (a group's samples
  // arriving together) wait for a second pass, which copies what the first
  // computed.
  void prefill(const std::vector<Request*>& reqs) {
    std::vector<Request*> first, second;
    for (Request* r : reqs) {
      refresh_adapter(*r);
      bool later = false;
      if (prefix_cache_ && !r->record_routing) {
        const int64_t cached = contents_->longest_prefix(r->prompt, r->adapter.get()).tokens;
        for (const Request* e : first) {
          if (e->adapter.get() != r->adapter.get()) continue;
          const size_t n = std::min(e->prompt.size(), r->prompt.size() - 1);
          size_t k = 0;
          while (k < n && e->prompt[k] == r->prompt[k]) ++k;
          if (static_cast<int64_t>(k) >= cached + 16) later = true;
          if (later) break;
        }
      }
      (later ? second : first).push_back(r);
    }
    prefill_pass(first);
    if (!second.empty()) prefill_pass(second);
  }

  // One prefill pass: each request takes a slot (the one holding its longest
  // cached prefix when free, else a free one the prefix is copied into), and
  // the uncached rest of every prompt is packed into one forward pass
  // (projections and MLPs over all tokens at once; attention within each
  // prompt, over its cached keys too), written to its slot, and the first
  // token of each sampled from its last position.
  void prefill_pass(const std::vector<Request*>& reqs) {
    const auto& c = model_->config();
    int64_t longest = 0;
    for (Request* r : reqs) longest = std::max(longest, static_cast<int64_t>(r->prompt.size()));
    ensure_capacity(longest);
    std::map<const Request*, int64_t> cached;          // prompt tokens taken from the cache
    std::map<const Request*, const void*> looked_up;   // the adapter they were looked up for
    for (Request* r : reqs) {
      areal::local_inference::SlotContents::Match m;
      if (prefix_cache_ && !r->record_routing) m = contents_->longest_prefix(r->prompt, r->adapter.get());
      auto it = std::find(free_slots_.begin(), free_slots_.end(), m.slot);
      if (m.tokens == 0 || it == free_slots_.end()) it = std::find(free_slots_.begin(), free_slots_.end(), contents_->pick(free_slots_));
      r->slot = *it;  // admission keeps at most max_batch requests active
      free_slots_.erase(it);
      if (m.tokens > 0 && m.slot != r->slot) cache_->copy_prefix(m.slot, r->slot, m.tokens);
      cached[r] = m.tokens;
      looked_up[r] = r->adapter.get();
      contents_->assign(r->slot, r->prompt, m.tokens, r->adapter);  // the rest is written below
      prompt_tokens_ += static_cast<int64_t>(r->prompt.size());
      cached_tokens_ += m.tokens;
      if (m.tokens > 0) sdk::host().metric_add(sdk::str("areal_inference_prefix_cache_hit_tokens_total"), static_cast<double>(m.tokens));
      sdk::host().metric_add(sdk::str("areal_inference_prompt_tokens_total"), static_cast<double>(r->prompt.size()));
    }
    // Prompts computed whole first (attention within each), then those continuing cached rows.
    std::vector<Request*> order(reqs.begin(), reqs.end());
    std::stable_partition(order.begin(), order.end(), [&](const Request* r) { return cached[r] == 0; });
    const size_t whole = static_cast<size_t>(std::count_if(order.begin(), order.end(), [&](const Request* r) { return cached[r] == 0; }));
    std::vector<int64_t> ids, pos, last, starts = {0};
    for (Request* r : order) {
      const int64_t S = static_cast<int64_t>(r->prompt.size());
      for (int64_t t = cached[r]; t < S; ++t) ids.push_back(r->prompt[static_cast<size_t>(t)]), pos.push_back(t);
      last.push_back(static_cast<int64_t>(ids.size()) - 1);
      starts.push_back(static_cast<int64_t>(ids.size()));
    }
    const auto routing = route_adapters(order, [&](size_t i, std::vector<int64_t>& rows) {
      for (int64_t t = starts[i]; t < starts[i + 1]; ++t) rows.push_back(t);
    });
    const auto idx = torch::TensorOptions().dtype(torch::kInt64);
    areal::torch_model::MoeRouting moe;
    moe.record = std::any_of(order.begin(), order.end(), [](const Request* r) { return r->record_routing; });
    const std::vector<int64_t> whole_bounds(starts.begin(), starts.begin() + static_cast<int64_t>(whole) + 1);
    torch::Tensor x;
    if (invariant_) x = invariant_layers(order, ids, pos, starts);
    else x = torch::embedding(model_->p("model.embed_tokens.weight"), areal::torch_model::upload(torch::tensor(ids, idx), device_));
    const torch::Tensor rope = invariant_ ? torch::Tensor() : model_->rope_table(torch::tensor(pos, idx));
    const torch::Tensor offsets = invariant_ ? torch::Tensor() : model_->varlen_offsets(whole_bounds);  // once for every layer
    // Made once for every layer: where each token's key and value go (one
    // write a layer for the pass), and the flash kernel's view of the
    // continuing prompts' slots (their keys so far and new).
    torch::Tensor write_slots, write_positions;
    areal::torch_model::DecoderModel::CachedKeys continuing;
    int64_t longest_new = 0;
    if (!invariant_) {
      std::vector<int64_t> slot_of;
      for (size_t i = 0; i < order.size(); ++i) slot_of.insert(slot_of.end(), static_cast<size_t>(starts[i + 1] - starts[i]), order[i]->slot);
      write_slots = areal::torch_model::upload(torch::tensor(slot_of, idx), device_);
      write_positions = areal::torch_model::upload(torch::tensor(pos, idx), device_);
      if (order.size() > whole && flash_layers().any) {
        std::vector<int32_t> counts, cu_queries = {0}, cu_keys;
        for (size_t i = whole; i < order.size(); ++i) {
          const int64_t n = starts[i + 1] - starts[i];
          counts.push_back(static_cast<int32_t>(cached.at(order[i]) + n));
          cu_queries.push_back(cu_queries.back() + static_cast<int32_t>(n));
          cu_keys.push_back(static_cast<int32_t>(order[i]->slot * cache_->capacity()));
          longest_new = std::max(longest_new, n);
        }
        cu_keys.push_back(static_cast<int32_t>((max_batch_ + 1) * cache_->capacity()));  // B+1 offsets; with counts given, the last is never read
        auto up = [&](const std::vector<int32_t>& v) { return areal::torch_model::upload(torch::tensor(v, torch::kInt32), device_); };
        continuing.counts = up(counts), continuing.cu_queries = up(cu_queries), continuing.cu_keys = up(cu_keys);
      }
    }
    for (int64_t l = 0; l < c.num_hidden_layers && !invariant_; ++l) {
      const std::string pre = "model.layers." + std::to_string(l) + ".";
      torch::Tensor q, k, v;
      model_->qkv(l, model_->rms_norm(x, model_->p(pre + "input_layernorm.weight")), rope, q, k, v);
      cache_->keys(l).index_put_({write_slots, write_positions}, k);
      cache_->values(l).index_put_({write_slots, write_positions}, v);
      std::vector<torch::Tensor> attended;
      if (whole > 0) {  // each prompt attends to itself only
        const int64_t T = whole_bounds.back();
        attended.push_back(model_->attend_packed_heads(l, q.narrow(0, 0, T), k.narrow(0, 0, T), v.narrow(0, 0, T), whole_bounds, offsets));
      }
      if (order.size() > whole) {  // their new queries over their slots' keys, cached and new
        const int64_t first = starts[whole];
        const torch::Tensor chunks = model_->attend_cached_chunks(l, q.narrow(0, first, starts.back() - first), cache_->keys(l), cache_->values(l),
                                                                  continuing, longest_new);
        if (chunks.defined()) {
          attended.push_back(chunks);
        } else {
          for (size_t i = whole; i < order.size(); ++i) {
            const int64_t from = cached.at(order[i]), n = starts[i + 1] - starts[i];
            const torch::Tensor ks = cache_->keys(l).select(0, order[i]->slot), vs = cache_->values(l).select(0, order[i]->slot);  // [capacity, kv, hd]
            attended.push_back(model_->attend_heads(l, q.narrow(0, starts[i], n), ks.narrow(0, 0, from + n), vs.narrow(0, 0, from + n), from));
          }
        }
      }
      // One projection over every row: per-row adapter groups index the pass's rows.
      x = after_attention(l, x, attended.size() == 1 ? attended[0] : torch::cat(attended, 0), &moe);
    }
    if (moe.record)  // requests recording routing compute their whole prompt
      for (size_t i = 0; i < order.size(); ++i)
        if (order[i]->record_routing) append_routing(*order[i], moe.chosen, starts[i], starts[i + 1] - starts[i]);
    for (Request* r : order) {
      r->length = static_cast<int64_t>(r->prompt.size());
      // An adapter replaced since the cache lookup computed the rest: the rows mix two adapters.
      if (r->adapter.get() == looked_up.at(r)) contents_->assign(r->slot, r->prompt, r->length, r->adapter);
      else contents_->forget(r->slot);
    }
    const torch::Tensor h = model_->rms_norm(x.index_select(0, areal::torch_model::upload(torch::tensor(last, idx), device_)), model_->p("model.norm.weight"));
    sample(order, h);
  }

  // batch_invariant: every layer over a step's rows (a request's rows
  // consecutive, rows [starts[i], starts[i+1]) at positions `pos`), each
  // row's key and value written to its request's slot and its query
  // attending over that slot, in the model's invariant units and key blocks.
  // The hidden states before the final norm, [rows, hidden].
  torch::Tensor invariant_layers(const std::vector<Request*>& reqs, const std::vector<int64_t>& ids, const std::vector<int64_t>& pos,
                                 const std::vector<int64_t>& starts) {
    namespace inv = areal::torch_model::invariant;
    const auto& c = model_->config();
    const auto idx = torch::TensorOptions().dtype(torch::kInt64);
    std::vector<inv::Unit> units;
    std::vector<int64_t> slot_of_row;
    for (size_t i = 0; i < reqs.size(); ++i) {
      const int64_t n = starts[i + 1] - starts[i];
      if (n == 0) continue;
      inv::add_units(units, inv::shape(device_), reqs[i]->slot, starts[i], n, pos[static_cast<size_t>(starts[i])]);
      slot_of_row.insert(slot_of_row.end(), static_cast<size_t>(n), reqs[i]->slot);
    }
    const int64_t rows = static_cast<int64_t>(ids.size());
    const auto plan = inv::plan_attention(rows, std::move(units), device_);
    const torch::Tensor slots = areal::torch_model::upload(torch::tensor(slot_of_row, idx), device_);
    const torch::Tensor rope = model_->rope_table(torch::tensor(pos, idx));  // checked on the host, then uploaded
    const torch::Tensor positions = areal::torch_model::upload(torch::tensor(pos, idx), device_);
    const int64_t capacity = cache_->capacity();
    torch::Tensor x = torch::embedding(model_->p("model.embed_tokens.weight"), areal::torch_model::upload(torch::tensor(ids, idx), device_));
    for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
      const torch::Tensor q = queries_caching_keys(l, x, rope, slots, positions);
      const torch::Tensor& kc = cache_->keys(l);
      const torch::Tensor& vc = cache_->values(l);
      // A unit's path is its slot; key block positions past the cache are masked.
      const torch::Tensor heads = model_->attend_invariant_heads(q, *plan, [&](const torch::Tensor& paths, int64_t block) {
        const int64_t width = plan->shape.key_block;
        const torch::Tensor at = torch::arange(block * width, (block + 1) * width, paths.options()).clamp_max(capacity - 1).unsqueeze(0);
        const torch::Tensor slot = paths.unsqueeze(1);
        return std::make_pair(kc.index({slot, at}), vc.index({slot, at}));  // [units, block, kv, hd]
      });
      x = after_attention(l, x, heads);
    }
    return x;
  }

  // Layer l's queries for rows x (input norm, projections, RoPE); the rows'
  // keys and values go into the cache at (slots, positions).
  torch::Tensor queries_caching_keys(int64_t l, const torch::Tensor& x, const torch::Tensor& rope, const torch::Tensor& slots, const torch::Tensor& positions) {
    return model_->queries_caching_keys(l, x, rope, cache_->keys(l), cache_->values(l), slots, positions);
  }

  // The rest of layer l from its attention heads ([rows, H*hd], before
  // o_proj): the residual of its output, then its MLP block. x, the layer's
  // input, is consumed (the residual adds may update it in place).
  torch::Tensor after_attention(int64_t l, torch::Tensor x, const torch::Tensor& heads, areal::torch_model::MoeRouting* moe = nullptr) {
    return model_->add_mlp_output(l, model_->add_attention_output(l, std::move(x), heads), moe);
  }

  // Which layers attend over the cache with the flash kernel (the others
  // under a mask): fixed for the engine's life, asked once, from a prefill
  // or a decode step before any graph capture (the first ask probes the kernel).
  struct FlashLayers {
    bool any = false, masked = false;
  };
  const FlashLayers& flash_layers() {
    if (!flash_layers_) {
      flash_layers_.emplace();
      for (int64_t l = 0; l < model_->config().num_hidden_layers; ++l) (model_->flash_cached(l) ? flash_layers_->any : flash_layers_->masked) = true;
    }
    return *flash_layers_;
  }

  // Rounds a decode step's shape up to one of few sizes, so that a few
  // captured graphs serve every step: slot rows to 1, 2, 4, 8, 12, 16, 24,
  // 32, 48, ... (at most max_batch), and where some layer reads masked keys,
  // keys to a power of two of at least 256 (at most max_context).
  int64_t graph_rows(int64_t rows) const {
    int64_t r = 1;
    while (r < rows) r = (r >= 8 && (r & (r - 1)) == 0) ? r + r / 2 : (r >= 8 ? (r / 3) * 4 : r * 2);
    return std::min<int64_t>(r, max_batch_);
  }
  int64_t graph_keys(int64_t keys) const {
    int64_t k = 256;
    while (k < keys) k *= 2;
    return std::min(k, max_context_);
  }

  // Device-sampled rows of a step: [token, log-prob] each, on its way to the host.
  struct DeviceDraws {
    std::vector<int64_t> rows;           // which of the step's requests they are
    areal::torch_model::HostCopy drawn;  // [rows, 2] float64
  };

  // A decode step queued on the device whose draws the host has not read.
  struct LaunchedStep {
    std::vector<Request*> reqs;
    std::vector<std::shared_ptr<Request>> held;  // a request can end, and leave active_, while its row is in flight
    std::vector<int64_t> versions;               // the policy version each row computes with
    DeviceDraws draws;
  };

  // Queues one token for every request of the batch. The step runs over the
  // cache's slot rows [0, rows) as they lie, one row per slot: a row without
  // a request of this step (a free slot, or one prefilled this round)
  // computes on a placeholder token, writes its key and value to the spare
  // slot `max_batch`, and is dropped. So no step copies the cache, and the
  // step's tensors have a shape fixed by (rows, keys) alone: on CUDA it
  // replays a captured graph of that shape. Where every layer's attention
  // reads each row's own key count (flash), keys is the cache's capacity:
  // one graph a row count serves every length, and no step reads a key past
  // its rows'. A row's input is its request's last token, or, while a step
  // drawing that token is still in flight (overlap), the token that step
  // leaves in next_tokens_ on the device. Rows sampled on the host are
  // drawn and delivered before this returns; the device's draws when the
  // step is completed.
  // `keep`: the step will stay in flight while the host reads the one
  // before (its draws then also feed the step after it).
  LaunchedStep launch_decode(std::vector<std::shared_ptr<Request>> batch, bool keep) {
    std::sort(batch.begin(), batch.end(), [](const auto& a, const auto& b) { return a->slot < b->slot; });
    LaunchedStep launched;
    for (const auto& r : batch) launched.reqs.push_back(r.get());
    const torch::Tensor hidden = invariant_ ? decode_invariant(launched.reqs) : decode(launched.reqs);
    launched.versions = versions_of(launched.reqs);
    launched.draws = draw(launched.reqs, hidden, launched.versions, keep);
    for (Request* r : launched.reqs) ++r->in_flight;
    launched.held = std::move(batch);
    return launched;
  }

  // The forward pass of a decode step over `batch` (sorted by slot): the
  // final norm's rows, one per request.
  torch::Tensor decode(const std::vector<Request*>& batch) {
    int64_t rows = batch.back()->slot + 1, longest = 0;
    for (const Request* r : batch) longest = std::max(longest, r->length + 1);  // its cache and the new token
    const bool any_flash = flash_layers().any, masks = flash_layers().masked;
    int64_t keys = longest;
    if (graphs_on_) {
      rows = graph_rows(rows);
      if (masks) keys = graph_keys(longest);
    }
    ensure_capacity(keys);
    if (!masks) keys = cache_->capacity();
    // [4, rows] host inputs -> the static buffer: token (-1: next_tokens_'s), position, keys seen, slot written.
    torch::Tensor host = torch::empty({4, rows}, torch::kInt64);
    auto in = host.accessor<int64_t, 2>();
    for (int64_t i = 0; i < rows; ++i) in[0][i] = 0, in[1][i] = 0, in[2][i] = 1, in[3][i] = max_batch_;
    std::vector<int64_t> slots;
    for (const Request* r : batch) {
      const int64_t i = r->slot;
      in[0][i] = r->in_flight > 0 ? -1 : r->last, in[1][i] = r->length, in[2][i] = r->length + 1, in[3][i] = i;
      slots.push_back(i);
    }
    decode_inputs_.narrow(1, 0, rows).copy_(areal::torch_model::upload(host, decode_inputs_.device()));
    torch::Tensor hidden;
    // Rows with adapters: their index lists change every step, so such steps run without a captured graph.
    const auto routing = route_adapters(batch, [&](size_t i, std::vector<int64_t>& out) { out.push_back(batch[i]->slot); });
    // Steps that record MoE routing run without a captured graph too (the
    // routers' choices come back to the host).
    areal::torch_model::MoeRouting moe;
    moe.record = std::any_of(batch.begin(), batch.end(), [](const Request* r) { return r->record_routing; });
    auto step = [this, rows, keys, any_flash, masks, &moe] { return decode_rows(rows, keys, any_flash, masks, moe.record ? &moe : nullptr); };
    if (graphs_on_ && !routing.any && !moe.record) {
      try {
        hidden = graphs_.run({rows, keys}, step);
      } catch (const std::exception& e) {
        // A capture this libtorch or driver refuses: the engine goes on without graphs.
        // libtorch may leave the device's generator marked as capturing: a
        // later random draw on it (dropout) can then fail, hence the advice.
        sdk::log(AREAL_LOG_WARN, "local",
                 std::string("CUDA graph capture failed, decoding without graphs from now on (set cuda_graphs: false to skip the attempt; a "
                             "failed capture can leave the GPU's random generator unusable for a trainer in this process): ") +
                     e.what());
        graphs_on_ = false;
        graphs_.clear();
        hidden = step();
      }
    } else {
      hidden = step();
    }
    ++decode_steps_;
    // Each row's input was its last sampled token: its routing is that position's.
    if (moe.record)
      for (Request* r : batch)
        if (r->record_routing) append_routing(*r, moe.chosen, r->slot, 1);
    // The fed token's row is written; one still on the device is recorded when its step is read (complete).
    for (Request* r : batch) {
      if (r->in_flight == 0) contents_->append(r->slot, r->last, r->adapter.get());
      ++r->length;
    }
    return hidden.index_select(0, areal::torch_model::upload(torch::tensor(slots, torch::kInt64), device_));
  }

  // A decode step in batch_invariant mode: a row a request, its token at its
  // position, through invariant_layers (never overlapped: every input token is on the host).
  torch::Tensor decode_invariant(const std::vector<Request*>& batch) {
    std::vector<int64_t> ids, pos, starts = {0};
    int64_t longest = 0;
    for (const Request* r : batch) {
      ids.push_back(r->last), pos.push_back(r->length), starts.push_back(static_cast<int64_t>(ids.size()));
      longest = std::max(longest, r->length + 1);
    }
    ensure_capacity(longest);
    const auto routing = route_adapters(batch, [&](size_t i, std::vector<int64_t>& out) { out.push_back(static_cast<int64_t>(i)); });
    const torch::Tensor x = invariant_layers(batch, ids, pos, starts);
    ++decode_steps_;
    for (Request* r : batch) contents_->append(r->slot, r->last, r->adapter.get()), ++r->length;
    return model_->rms_norm(x, model_->p("model.norm.weight"));
  }

  // Reads a launched step's device draws (waiting for the device until that
  // step, not any later one, is done) and delivers them. A row whose request
  // ended meanwhile (it drew a stop token in the step before, or failed) ran
  // ahead of the host and is dropped.
  void complete(LaunchedStep& step) {
    for (Request* r : step.reqs) --r->in_flight;
    if (step.draws.rows.empty()) return;
    const torch::Tensor& out = step.draws.drawn.get();
    const double* o = out.data_ptr<double>();
    for (size_t j = 0; j < step.draws.rows.size(); ++j) {
      const size_t i = static_cast<size_t>(step.draws.rows[j]);
      Request& r = *step.reqs[i];
      if (r.finish != 0) continue;
      deliver(r, static_cast<int32_t>(o[2 * j]), static_cast<float>(o[2 * j + 1]), step.versions[i]);
      // A later step in flight fed this token to the row it wrote.
      if (r.in_flight > 0 && r.finish == 0) contents_->append(r.slot, r.last, r.adapter.get());
    }
  }

  // The policy version of each request's next token: its adapter's, or the base weights'.
  std::vector<int64_t> versions_of(const std::vector<Request*>& reqs) {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<int64_t> v;
    for (const Request* r : reqs) v.push_back(r->adapter ? r->adapter->version : version_);
    return v;
  }

  // The decode step over slot rows [0, rows), reading its inputs from
  // decode_inputs_: final hidden states [rows, hidden]. Flash layers
  // (`flash`) read each row's key count; the others (`masks`) keys [0, keys)
  // under a mask.
  torch::Tensor decode_rows(int64_t rows, int64_t keys, bool flash, bool masks, areal::torch_model::MoeRouting* moe = nullptr) {
    const auto& c = model_->config();
    torch::Tensor tokens = decode_inputs_[0].narrow(0, 0, rows);
    const torch::Tensor positions = decode_inputs_[1].narrow(0, 0, rows);
    if (overlap_) tokens = torch::where(tokens.lt(0), next_tokens_.narrow(0, 0, rows), tokens);  // drawn by a step in flight
    const torch::Tensor key_counts = decode_inputs_[2].narrow(0, 0, rows), write_slots = decode_inputs_[3].narrow(0, 0, rows);
    // Computed once for every layer: the rotary table and which cached keys each row sees.
    const torch::Tensor rope = model_->rope_table(positions);
    areal::torch_model::DecoderModel::CachedKeys seen;
    if (flash) {  // row i's keys are rows [0, count) of slot i: flash's packed offsets i * capacity
      seen.counts = key_counts.to(torch::kInt32);
      seen.cu_queries = torch::arange(rows + 1, key_counts.options().dtype(torch::kInt32));
      seen.cu_keys = seen.cu_queries * static_cast<int32_t>(cache_->capacity());
    }
    if (masks) {
      // A row's cached keys lie at their positions: it sees keys [0, count),
      // and in a sliding layer (GPT-OSS) only the last `window` of them.
      const torch::Tensor key = torch::arange(keys, key_counts.options()).unsqueeze(0);
      seen.width = keys;
      seen.allowed = (key < key_counts.unsqueeze(1)).view({rows, 1, 1, keys});
      if (c.has_sliding_layers())
        seen.allowed_sliding = seen.allowed & (key > (positions.unsqueeze(1) - c.sliding_window)).view({rows, 1, 1, keys});
      // On CUDA as the additive mask attention takes, made once instead of in every layer.
      auto additive = [&](const torch::Tensor& m) {
        return torch::zeros(m.sizes(), torch::TensorOptions().dtype(dtype_).device(device_)).masked_fill_(m.logical_not(), -std::numeric_limits<double>::infinity());
      };
      if (device_.is_cuda()) {
        seen.allowed = additive(seen.allowed);
        if (seen.allowed_sliding.defined()) seen.allowed_sliding = additive(seen.allowed_sliding);
      }
    }
    torch::Tensor x = torch::embedding(model_->p("model.embed_tokens.weight"), tokens);
    for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
      const torch::Tensor q = queries_caching_keys(l, x, rope, write_slots, positions);
      x = after_attention(l, x, model_->attend_cached_heads(l, q, cache_->keys(l), cache_->values(l), seen), moe);
    }
    return model_->rms_norm(x, model_->p("model.norm.weight"));
  }

  // Appends rows [first, first + count) of a step's recorded routing (one
  // [rows, k] tensor per MoE layer) to a request's, position by position.
  void append_routing(Request& r, const std::vector<torch::Tensor>& chosen, int64_t first, int64_t count) {
    std::vector<torch::Tensor> layers;
    for (const auto& t : chosen) layers.push_back(t.narrow(0, first, count));
    const torch::Tensor rows = torch::stack(layers, 1).to(torch::kCPU, torch::kInt32).contiguous();  // [count, layers, k]
    const auto* v = rows.data_ptr<int32_t>();
    for (int64_t i = 0; i < rows.numel(); ++i) r.routing.push_back(static_cast<uint16_t>(v[i]));
  }

  // Whether a request's next token is drawn by the batched device sampler
  // (batched_sampler.hpp: greedy, temperature, top-k, top-p): anything whose
  // distribution nothing reshapes.
  bool device_sampled(const Request& r) const { return !r.reshaped(); }

  // Samples one token for each request from its row of the head's log-probs
  // (from `hidden` [n, hidden], the final norm's rows; float64 from the
  // float32 logits). The device rows draw as areal::sampling does on the
  // host, with each request's own seeded uniform, all at once
  // (batched_sampler.hpp), and their [token, log-prob] rows are queued for
  // the host (one copy a step; read by complete, or by sample right away).
  // Rows sampled on the host (a reshaped distribution) are drawn and
  // delivered now. With `feed`, the device's draws also go to next_tokens_
  // at their slots, the inputs of a step queued before these are read.
  DeviceDraws draw(const std::vector<Request*>& reqs, const torch::Tensor& hidden, const std::vector<int64_t>& versions, bool feed) {
    const torch::Tensor logits = model_->logits(hidden);
    const torch::Tensor raw = torch::log_softmax(logits.to(torch::kFloat64), -1);
    DeviceDraws d;
    std::vector<int64_t>& on_device = d.rows;
    for (size_t i = 0; i < reqs.size(); ++i) {
      if (device_sampled(*reqs[i])) on_device.push_back(static_cast<int64_t>(i));
      else emit(*reqs[i], raw[static_cast<int64_t>(i)].to(torch::kCPU), versions[i]);
    }
    if (on_device.empty()) return d;
    const int64_t n = static_cast<int64_t>(on_device.size());
    std::vector<areal::local_inference::RowSampling> params(static_cast<size_t>(n));
    std::vector<int64_t> slots(static_cast<size_t>(n));
    for (int64_t j = 0; j < n; ++j) {
      Request& r = *reqs[static_cast<size_t>(on_device[j])];
      const auto& s = r.sampling;
      // Greedy draws no number, as on the host.
      params[j] = {s.temperature, s.temperature <= 0 ? 0.0 : r.rng.uniform(), s.top_k, s.top_p};
      slots[j] = r.slot;
    }
    using areal::torch_model::upload;
    const torch::Tensor device_rows = n == raw.size(0) ? torch::Tensor() : upload(torch::tensor(on_device, torch::kInt64), raw.device());
    const auto drawn = areal::local_inference::draw_rows(n == raw.size(0) ? raw : raw.index_select(0, device_rows), params, raw_logprobs_);
    const torch::Tensor tok = drawn.tokens;
    if (feed) next_tokens_.index_put_({upload(torch::tensor(slots, torch::kInt64), raw.device())}, tok.squeeze(1));
    torch::Tensor lp = drawn.logprobs;
    if (invariant_ && !raw_logprobs_)  // what the trainer recomputes, by the same function (greedy rows at temperature 1)
      lp = model_->sampled_logprobs(n == raw.size(0) ? logits : logits.index_select(0, device_rows), tok.squeeze(1), drawn.temperatures.squeeze(1))
               .to(torch::kFloat64)
               .unsqueeze(1);
    d.drawn = areal::torch_model::HostCopy(torch::cat({tok.to(torch::kFloat64), lp}, 1));  // the step's one transfer
    return d;
  }

  // Samples and delivers one token for each request now (prefill's first tokens).
  void sample(const std::vector<Request*>& reqs, const torch::Tensor& hidden) {
    LaunchedStep step;
    step.reqs = reqs;
    step.versions = versions_of(reqs);
    step.draws = draw(reqs, hidden, step.versions, /*feed=*/false);
    for (Request* r : reqs) ++r->in_flight;
    complete(step);
  }

  // Samples the next token of `r` on the host from its raw log-prob row and
  // delivers it with its log-prob under the sampling distribution (the ABI's
  // convention): for requests whose distribution is reshaped (which may also be cut: top-k/top-p).
  void emit(Request& r, const torch::Tensor& raw_row, int64_t version) {
    const torch::Tensor row = r.reshaped() ? reshape(r, raw_row) : raw_row;
    if (!row.defined()) {
      // A whole output nothing may extend (ignore_eos) stopped; one cut
      // before it was valid JSON (no room left in max_tokens) is a length finish.
      r.finish = r.matcher && !r.matcher->complete() ? AREAL_FINISH_LENGTH : AREAL_FINISH_STOP;
      return;
    }
    const torch::Tensor contiguous = row.contiguous();
    const double* p = contiguous.data_ptr<double>();
    const auto& s = r.sampling;
    const auto n = static_cast<int32_t>(contiguous.numel());
    int32_t tok;
    double lp_scaled;
    if (areal::sampling::samples_whole_distribution(n, s.temperature, s.top_k, s.top_p)) {
      // Weights in one vectorised pass; only the inverse-CDF walk is scalar.
      const double max = contiguous.max().item<double>(), t = s.temperature;
      const torch::Tensor w = ((contiguous - max) / t).exp_();
      const double sum = w.sum().item<double>();
      tok = areal::sampling::sample_from_weights(w.data_ptr<double>(), n, sum, r.rng);
      lp_scaled = (p[tok] - max) / t - std::log(sum);
    } else {
      tok = areal::sampling::sample(std::vector<double>(p, p + n), s.temperature, s.top_k, s.top_p, r.rng);
      lp_scaled = areal::sampling::sampling_logprob(p, n, s.temperature, tok);
    }
    deliver(r, tok, static_cast<float>(raw_logprobs_ ? raw_row[tok].item<double>() : lp_scaled), version);
  }

  // Hands a sampled token and its log-prob to the request's sink and decides
  // whether the request ends (stop id, stop string, length).
  // `version`: the policy version the token was computed with (an adapter's tokens carry the adapter's).
  void deliver(Request& r, int32_t tok, float lp, int64_t version) {
    const auto& s = r.sampling;
    areal_gen_chunk chunk{AREAL_OFFSET_OF_END(areal_gen_chunk, count), &tok, &lp, &version, 1};
    ++r.generated;
    r.last = tok;
    if (areal_status* st = r.sink.on_tokens(r.sink.ctx, &chunk)) {
      sdk::host().status_free(st);
      r.aborted = true;
      return;
    }
    const bool stop_id = std::find(r.stop_ids.begin(), r.stop_ids.end(), tok) != r.stop_ids.end() ||
                         (tok == model_->config().eos_token_id && !s.ignore_eos);
    if (s.frequency_penalty != 0 || s.presence_penalty != 0) ++r.generated_counts[tok];
    if (r.matcher && !stop_id) r.matcher->feed(tokenizer_->token_bytes(tok));
    if (r.decoder) {
      const size_t before = r.text.size();
      r.text += r.decoder->push(tok);
      // Only a match that ends in the new text is new (the reply so far was
      // searched before: a scan of all of it per token is quadratic); none
      // while min_new_tokens holds the end back, as vLLM's min_tokens does.
      if (r.generated > r.min_new)  // as the stop-id mask: the end may come from token min_new + 1 on
        for (const auto& ss : r.stop_strings)
          if (r.text.find(ss, before >= ss.size() ? before - ss.size() + 1 : 0) != std::string::npos) r.finish = AREAL_FINISH_STOP;
    }
    if (stop_id) r.finish = AREAL_FINISH_STOP;
    else if (r.finish == 0 && r.generated >= r.limit) r.finish = AREAL_FINISH_LENGTH;
  }

  // The distribution actually sampled from, as normalised log-probs: the
  // raw row with logit_bias, OpenAI's penalties (on tokens generated so far)
  // and the structured-output mask applied. Undefined when the mask leaves
  // nothing (a complete output under ignore_eos, or no room left for any
  // valid continuation): the request ends.
  torch::Tensor reshape(Request& r, const torch::Tensor& raw_row) {
    torch::Tensor row = raw_row.clone().contiguous();
    double* q = row.data_ptr<double>();
    for (const auto& [id, bias] : r.logit_bias) q[id] += bias;
    const auto& s = r.sampling;
    for (const auto& [id, count] : r.generated_counts) q[id] -= s.frequency_penalty * count + (count > 0 ? s.presence_penalty : 0.0f);
    // Budget-aware structured output: near the end of max_tokens, only
    // tokens after which the shortest way to a whole value (a byte a token)
    // and the stop token still fit are allowed, so the output is valid JSON
    // whatever the model samples (white space, long strings), within
    // max_tokens. Outside the window no single token can take all the room.
    bool budgeted = false;
    if (r.matcher) {
      constexpr int64_t kBudgetWindow = 256;
      const int64_t left = r.limit - r.generated;  // this token included
      const auto rest = r.matcher->shortest_completion();
      budgeted = rest && left - 2 < static_cast<int64_t>(rest->size()) + kBudgetWindow;
      if (!budgeted) r.trie->allowed_tokens(*r.matcher, allowed_);
      else if (left < 2) allowed_.assign(r.trie->vocab_size(), 0);  // only the stop token
      else if (static_cast<int64_t>(rest->size()) > left - 2 || !r.trie->allowed_tokens(*r.matcher, allowed_, static_cast<size_t>(left - 2)))
        r.trie->prefix_tokens(*rest, allowed_);  // too little room: the fastest way to close
    }
    const int32_t eos = model_->config().eos_token_id;
    const auto is_stop = [&](size_t id) {
      return (eos >= 0 && id == static_cast<size_t>(eos)) || std::find(r.stop_ids.begin(), r.stop_ids.end(), static_cast<int32_t>(id)) != r.stop_ids.end();
    };
    bool only_stops_allowed = false;  // a complete output the schema lets nothing extend
    if (r.matcher) {
      if (r.matcher->complete()) {
        for (int32_t id : r.stop_ids) allowed_[id] = 1;
        if (!s.ignore_eos && eos >= 0) allowed_[eos] = 1;
      }
      const double kMasked = -std::numeric_limits<double>::infinity();
      bool any = false;
      only_stops_allowed = true;
      for (size_t i = 0; i < allowed_.size(); ++i) {
        if (allowed_[i]) any = true, only_stops_allowed = only_stops_allowed && is_stop(i);
        else q[i] = kMasked;
      }
      if (!any) return torch::Tensor();  // nothing can follow: the output ends (emit() says how)
    }
    // Too short to end yet - unless the output is whole and only an end may
    // follow (min_tokens cannot be met then; masking it would leave no token).
    if (r.generated < r.min_new && !(budgeted && r.matcher->complete()) && !only_stops_allowed) {
      const double kMasked = -std::numeric_limits<double>::infinity();
      for (int32_t id : r.stop_ids) q[id] = kMasked;
      if (eos >= 0) q[eos] = kMasked;
    }
    return torch::log_softmax(row, 0);
  }

  void schedule() {
    torch::NoGradGuard no_grad;
    while (true) {
      std::vector<std::shared_ptr<Request>> admitted;
      bool paused;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        // A step in flight is read even while paused (its tokens are computed); a weight update waiting for the step lock goes first.
        // An abort while paused wakes it too: the aborted request ends now, not at resume().
        cv_.wait(lock, [&] {
          return stopping_ ||
                 (step_waiters_.load() == 0 && (pending_.has_value() || aborts_waiting_ || (!paused_ && (!queue_.empty() || !active_.empty()))));
        });
        if (stopping_) break;
        paused = paused_;
        aborts_waiting_ = false;  // this round's finish_done ends them
        // Into the active set in the same critical section that takes them
        // off the queue: an abort() in between finds them there (one that
        // found neither would be lost: the request would run to its end).
        while (!paused && !queue_.empty() && active_.size() < static_cast<size_t>(max_batch_)) {
          admitted.push_back(queue_.front());
          active_.push_back(queue_.front());
          queue_.pop_front();
        }
      }
      std::lock_guard<std::mutex> step(step_mutex_);
      try {
        if (fault_.round > 0 && ++rounds_ == fault_.round) throw std::runtime_error("injected step fault (AREAL_TEST_LOCAL_STEP_FAULT)");
        step_once(admitted, paused);
      } catch (const std::exception& e) {
        fail_active(e.what());  // those requests end in an error; the engine goes on
      } catch (...) {
        fail_active("unknown exception");
      }
      finish_done();
    }
    // Shutting down: a step still in flight is waited for, not delivered (its requests end aborted).
    if (pending_) pending_->draws.drawn.get();
  }

  // One round: prefill of the admitted requests, then one decode step of the
  // others. With overlap, a decode step may be left in flight past the
  // round (pending_): the next round queues the step after it first, then
  // reads it, so the device computes while the host delivers. Admissions,
  // a pause, and a weight update waiting for the step lock read it first.
  void step_once(const std::vector<std::shared_ptr<Request>>& admitted, bool paused) {
    const bool may_run_on = !paused && admitted.empty() && step_waiters_.load() == 0;
    if (pending_) {
      LaunchedStep in_flight = std::move(*pending_);
      pending_.reset();
      if (may_run_on) {
        const auto next = decodable(admitted);
        if (!next.empty() && may_overlap(next)) pending_ = launch_decode(next, true);
      }
      complete(in_flight);
      if (pending_ || paused) return;
    }
    if (paused) return;
    // Prefill in packs of at most max_prefill_tokens prompt tokens (a longer prompt alone).
    std::vector<Request*> pack;
    int64_t pack_tokens = 0;
    for (auto& r : admitted) {
      if (r->aborted) continue;
      const int64_t S = static_cast<int64_t>(r->prompt.size());
      if (!pack.empty() && pack_tokens + S > max_prefill_tokens_) {
        prefill(pack);
        pack.clear();
        pack_tokens = 0;
      }
      pack.push_back(r.get());
      pack_tokens += S;
    }
    if (!pack.empty()) prefill(pack);
    const auto batch = decodable(admitted);
    if (batch.empty()) return;
    const bool overlap = may_run_on && may_overlap(batch);  // asked before the launch counts its rows as in flight
    LaunchedStep launched = launch_decode(batch, overlap);
    if (overlap) pending_ = std::move(launched);
    else complete(launched);
  }

  // The active requests a decode step can take now: not ended, not aborted,
  // past prefill (requests admitted this round got their first token
  // there), and below their token limit counting tokens still in flight.
  std::vector<std::shared_ptr<Request>> decodable(const std::vector<std::shared_ptr<Request>>& admitted) const {
    std::vector<std::shared_ptr<Request>> out;
    for (const auto& r : active_)
      if (!r->aborted && r->finish == 0 && r->generated + r->in_flight > 0 && r->generated + r->in_flight < r->limit &&
          std::find(admitted.begin(), admitted.end(), r) == admitted.end())
        out.push_back(r);
    return out;
  }

  // Whether a step of `batch` may stay in flight while the host reads the
  // one before, and be read after the next is queued: only when every row
  // is drawn on the device (a host-sampled row needs its step's logits on
  // the host first) and nothing comes back to the host mid-step.
  bool may_overlap(const std::vector<std::shared_ptr<Request>>& batch) const {
    if (!overlap_) return false;
    return std::all_of(batch.begin(), batch.end(), [&](const auto& r) { return device_sampled(*r) && !r->record_routing; });
  }

  // A step threw (out of device memory, a bug): every request in the step
  // ends with AREAL_FINISH_ERROR and the message, and the cache is dropped
  // (it may hold half-written rows). The process and later requests go on.
  // Dropping the cache may throw as well (after a device fault every CUDA
  // call can): that is logged, and the requests still end; an exception
  // out of here would end the scheduler thread, and every request with it.
  void fail_active(const std::string& what) {
    pending_.reset();  // its rows are of the requests failed here, or of ended ones
    sdk::log(AREAL_LOG_ERROR, "local", "a generation step failed: " + what + "; its " + std::to_string(active_.size()) + " request(s) end with an error");
    sdk::host().metric_add(sdk::str("areal_inference_step_errors_total"), 1.0);
    for (auto& r : active_)
      if (r->finish == 0 && !r->aborted) {
        r->finish = AREAL_FINISH_ERROR;
        r->error = "local inference step failed: " + what;
      }
    try {
      drop_cache();
      if (fault_.drop) throw std::runtime_error("injected fault dropping the cache (AREAL_TEST_LOCAL_STEP_FAULT)");
    } catch (const std::exception& e) {
      sdk::log(AREAL_LOG_ERROR, "local", std::string("dropping the KV cache after the failed step failed too: ") + e.what());
    }
  }

  // Host bookkeeping first, the graphs (which wait for the device) last.
  void drop_cache() {
    contents_->clear();
    cache_->clear();
    graphs_.clear();
  }

  // Test hook: AREAL_TEST_LOCAL_STEP_FAULT=N makes the scheduler's Nth round
  // throw; "N,drop" makes dropping the cache after it throw too. Tests only.
  void read_fault_hook() {
    const char* e = std::getenv("AREAL_TEST_LOCAL_STEP_FAULT");
    if (e == nullptr || *e == 0) return;
    const std::string v = e;
    char* end = nullptr;
    fault_.round = std::strtoll(v.c_str(), &end, 10);
    fault_.drop = std::string(end) == ",drop";
    if (fault_.round < 1 || (*end != 0 && !fault_.drop))
      throw sdk::invalid_argument("local: AREAL_TEST_LOCAL_STEP_FAULT='" + v + "' is not N or N,drop with N >= 1 (a test hook: unset it)");
    sdk::log(AREAL_LOG_WARN, "local", "AREAL_TEST_LOCAL_STEP_FAULT=" + v + ": the scheduler's round " + std::to_string(fault_.round) + " fails on purpose (a test hook)");
  }

  void finish_done() {
    std::vector<std::shared_ptr<Request>> done;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (auto it = active_.begin(); it != active_.end();) {
        Request& r = **it;
        if (r.aborted || r.finish != 0) {
          if (r.aborted && r.finish == 0) r.finish = AREAL_FINISH_ABORT;
          done.push_back(*it);
          ids_.erase(r.id);
          it = active_.erase(it);
        } else {
          ++it;
        }
      }
    }
    for (auto& r : done) {
      if (r->slot >= 0) free_slots_.push_back(r->slot), contents_->release(r->slot);
      r->slot = -1;
    }
    // Idle: give the cache's memory back, unless it holds prefixes for the
    // next requests (on CUDA with graphs it stays, as a serving engine's
    // preallocated cache does, and so do the graphs).
    if (free_slots_.size() == static_cast<size_t>(max_batch_) && !graphs_on_ && !prefix_cache_) drop_cache();
    for (auto& r : done)  // one sink's failure is that request's alone
      sdk::contain("local", [&] {
        if (r->record_routing && r->sink.struct_size >= AREAL_OFFSET_OF_END(areal_gen_sink, on_routing) && r->sink.on_routing != nullptr) {
          const auto& c = model_->config();
          const size_t per_position = static_cast<size_t>(c.moe_layer_count() * c.num_experts_per_tok);
          const areal_routing routing{AREAL_OFFSET_OF_END(areal_routing, experts), static_cast<uint32_t>(c.moe_layer_count()),
                                      static_cast<uint32_t>(c.num_experts_per_tok), static_cast<uint32_t>(c.num_experts),
                                      r->routing.size() / per_position, r->routing.data()};
          r->sink.on_routing(r->sink.ctx, &routing);
        }
        if (r->finish == AREAL_FINISH_ERROR) {
          areal_status* st = sdk::host().status_new(AREAL_CODE_INTERNAL, sdk::str(r->error));
          r->sink.on_done(r->sink.ctx, r->finish, st);
          sdk::host().status_free(st);
        } else {
          r->sink.on_done(r->sink.ctx, r->finish, nullptr);
        }
      });
  }

  std::unique_ptr<areal::torch_model::DecoderModel> model_;
  std::unique_ptr<areal::local_inference::AdapterRegistry> adapters_;
  std::mutex trie_mutex_;
  std::unique_ptr<areal::structured_output::VocabularyTrie> trie_;
  std::vector<uint8_t> allowed_;  // scheduler thread's scratch mask
  std::unique_ptr<areal::local_inference::KvCache> cache_;  // scheduler thread only
  std::optional<FlashLayers> flash_layers_;                   // scheduler thread only
  torch::Tensor decode_inputs_;  // [4, max_batch] int64 on the device: a decode step's static inputs
  torch::Tensor next_tokens_;    // [max_batch] int64 on the device: by slot, the last tokens drawn there (overlap)
  bool overlap_ = false;         // a decode step may stay in flight while the host reads the one before
  std::optional<LaunchedStep> pending_;  // that step (scheduler thread only)
  areal::local_inference::CudaGraphCache graphs_;
  std::atomic<bool> graphs_on_{false};  // decode steps replay captured graphs (CUDA, cuda_graphs: true); info() reads it
  std::atomic<int64_t> decode_steps_{0};  // read by info() on other threads
  struct {
    int64_t round = 0;  // AREAL_TEST_LOCAL_STEP_FAULT's round (0: none)
    bool drop = false;
  } fault_;
  int64_t rounds_ = 0;  // scheduler rounds so far (the hook counts them)
  std::vector<int> free_slots_;
  std::shared_ptr<const areal::tokenizer::Tokenizer> tokenizer_;
  torch::Dtype dtype_ = torch::kFloat32;
  torch::Device device_ = torch::kCPU;
  std::string path_, name_;
  int max_batch_ = 8;
  int64_t max_prefill_tokens_ = 16384, min_new_tokens_ = 0;
  std::vector<int64_t> end_ids_;  // every end-of-sequence id in the vocabulary (end_of_sequence_ids)
  bool prefix_cache_ = true;
  std::unique_ptr<areal::local_inference::SlotContents> contents_;  // what each slot's rows hold (scheduler thread)
  std::atomic<int64_t> prompt_tokens_{0}, cached_tokens_{0};       // prefilled, and of those taken from the cache
  bool raw_logprobs_ = false;
  bool invariant_ = false;  // batch_invariant
  int64_t max_context_ = 4096, version_ = 0;

  std::mutex mutex_;       // queue, active set, ids, flags, version
  std::mutex step_mutex_;  // held while the model computes; weight updates wait for it
  // Threads waiting for step_mutex_ (weight updates), counted from before
  // they lock it until after they let it go. A round that starts while one
  // waits leaves no step in flight, and the scheduler does not take the
  // lock again until they are done: a mutex is not fair, and a scheduler
  // that retakes it at once would hold an update back until generation ends.
  std::atomic<int> step_waiters_{0};
  struct StepWaiter {
    LocalInference& engine;
    explicit StepWaiter(LocalInference& e) : engine(e) { ++engine.step_waiters_; }
    ~StepWaiter() {
      {
        std::lock_guard<std::mutex> lock(engine.mutex_);
        --engine.step_waiters_;
      }
      engine.cv_.notify_all();
    }
    StepWaiter(const StepWaiter&) = delete;
    StepWaiter& operator=(const StepWaiter&) = delete;
  };
  std::condition_variable cv_;
  bool paused_ = false, stopping_ = false;
  bool aborts_waiting_ = false;  // an active request was aborted since the scheduler last woke
  std::deque<std::shared_ptr<Request>> queue_;
  std::vector<std::shared_ptr<Request>> active_;
  std::set<uint64_t> ids_;
  std::thread thread_;
};

}  // namespace

AREAL_EXPORT_INFERENCE(LocalInference)
