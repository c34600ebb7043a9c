// local: the embedded inference backend on libtorch (plugin kind inference).
//
// One scheduler thread owns the model. New requests are prefilled one by
// one (the prompt's keys and values fill the request's slot of a shared
// KV cache, [max_batch slots, capacity, kv_heads, head_dim] per layer, whose
// capacity grows with the longest request); active requests then decode
// together: one token each through every layer as one batch, attention
// included (each row masked to its own length), so a decode step costs a
// fixed number of kernels however many requests run.
// The model is the same DecoderModel the trainer uses, so the log-probs
// reported here are the ones training recomputes. It runs on `device` in
// `dtype`; the log-prob head is float32 and sampling happens on the host
// over float64 log-probs of that head.
#include <atomic>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>
#include <memory>
#include <mutex>
#include <thread>

#include <nlohmann/json.hpp>

#include "core/plugin_host/error.hpp"
#include "core/sampling/sampling.hpp"
#include "core/structured_output/token_mask.hpp"
#include "core/hf/tokenizer/tokenizer.hpp"
#include "areal/sdk.hpp"
#include "areal/sdk_json.hpp"
#include "decoder_model.hpp"
#include "device.hpp"

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
  int64_t generated = 0, limit = 0;
  areal::sampling::SplitMix64 rng{0};
  std::unique_ptr<areal::tokenizer::IncrementalDecoder> decoder;
  std::string text;
  int32_t finish = 0;  // areal_finish_reason once decided
  // What reshapes the distribution besides temperature (ABI 1.3).
  std::vector<std::pair<int32_t, float>> logit_bias;
  std::unordered_map<int32_t, int32_t> generated_counts;  // for frequency/presence penalties
  std::optional<areal::structured_output::JsonMatcher> matcher;
  const areal::structured_output::VocabularyTrie* trie = nullptr;  // the engine's, with a matcher
  bool reshaped() const {
    return !logit_bias.empty() || sampling.frequency_penalty != 0 || sampling.presence_penalty != 0 || matcher.has_value();
  }
};

class LocalInference {
 public:
  static constexpr const char* kName = "local";
  static constexpr const char* kVersion = "0.1.0";
  static constexpr const char* kDescription =
      "Embedded libtorch inference: batched decoding with KV caches over the training model's code. Honours "
      "frequency_penalty, presence_penalty, logit_bias and structured output (JSON object / JSON Schema, by masking "
      "the tokens that cannot continue a valid output); log-probs are those of the distribution actually sampled from.";
  static constexpr const char* kConfigSchema = R"({"type": "object", "keys": {
    "model_path": {"type": "string", "format": "path", "doc": "Hugging Face model folder (config.json, safetensors, tokenizer files)."},
    "model": {"type": "string", "default": "", "doc": "Model name reported by info; empty: the folder name."},
    "device": {"type": "string", "default": "auto", "doc": "cpu, cuda, cuda:N, or auto (cuda:0 when this build's libtorch has CUDA and a GPU is visible, else cpu)."},
    "dtype": {"type": "string", "enum": ["auto", "bfloat16", "float16", "float32", "float64"], "default": "auto", "doc": "Compute dtype (the log-prob head is float32 at least). auto: bfloat16 on CUDA, float32 on CPU."},
    "max_batch": {"type": "integer", "default": 8, "minimum": 1, "maximum": 1024, "doc": "Requests decoded together."},
    "max_context": {"type": "integer", "default": 0, "minimum": 0, "doc": "Prompt plus output limit; 0: the model's max_position_embeddings."},
    "logprob_mode": {"type": "string", "enum": ["sampling", "raw"], "default": "sampling", "doc": "sampling: log-probs of softmax(logits / temperature), the ABI's convention and what training recomputes. raw: temperature-1 log-probs, which break that convention; only for test servers that emulate vLLM's or SGLang's raw mode."},
    "threads": {"type": "integer", "default": 0, "minimum": 0, "doc": "Torch intra-op threads; 0 keeps the default."}
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
      if (fs::exists(fs::path(path_) / "tokenizer.json")) tokenizer_ = areal::tokenizer::Tokenizer::from_dir(path_);
    } catch (const sdk::Error&) {
      throw;
    } catch (const std::exception& e) {
      throw sdk::invalid_argument(std::string("local: ") + e.what());
    }
    for (const auto& [name, p] : model_->named_parameters()) const_cast<torch::Tensor&>(p).set_requires_grad(false);
    name_ = c.value("model", std::string());
    if (name_.empty()) name_ = fs::path(path_).filename().string();
    max_batch_ = c.value("max_batch", 8);
    raw_logprobs_ = c.value("logprob_mode", std::string("sampling")) == "raw";
    max_context_ = c.value("max_context", int64_t{0});
    if (max_context_ == 0) max_context_ = model_->config().max_position_embeddings;
    for (int s = max_batch_ - 1; s >= 0; --s) free_slots_.push_back(s);
    thread_ = std::thread([this] { schedule(); });
  }

  ~LocalInference() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    cv_.notify_all();
    thread_.join();
    for (auto& r : queue_) r->sink.on_done(r->sink.ctx, AREAL_FINISH_ABORT, nullptr);
    for (auto& r : active_) r->sink.on_done(r->sink.ctx, AREAL_FINISH_ABORT, nullptr);
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
    if (s.temperature < 0) throw sdk::invalid_argument("temperature must be >= 0");
    if (s.top_p <= 0 || s.top_p > 1) throw sdk::invalid_argument("top_p must be in (0, 1]");
    for (int32_t id : r->prompt)
      if (id < 0 || id >= model_->config().vocab_size) throw sdk::invalid_argument("input id " + std::to_string(id) + " is outside the vocabulary");
    if (static_cast<int64_t>(r->prompt.size()) >= max_context_)
      throw sdk::invalid_argument("prompt of " + std::to_string(r->prompt.size()) + " tokens leaves no room in max_context " + std::to_string(max_context_));
    if (s.stop_token_ids) r->stop_ids.assign(s.stop_token_ids, s.stop_token_ids + s.stop_token_ids_count);
    for (int32_t id : r->stop_ids)
      if (id < 0 || id >= model_->config().vocab_size) throw sdk::invalid_argument("stop token id " + std::to_string(id) + " is outside the vocabulary");
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
        if (r->id == id) r->aborted = true;  // ends before its next token
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
    if (fresh.config().to_hf_json() != model_->config().to_hf_json() &&
        (fresh.config().hidden_size != model_->config().hidden_size || fresh.config().num_hidden_layers != model_->config().num_hidden_layers ||
         fresh.config().vocab_size != model_->config().vocab_size))
      throw sdk::invalid_argument("update_weights: the new weights are for a different architecture");
    // Between two decode steps: the scheduler holds the lock while stepping.
    std::lock_guard<std::mutex> step(step_mutex_);
    torch::NoGradGuard no_grad;
    for (const auto& [name, t] : fresh.named_parameters()) const_cast<torch::Tensor&>(model_->p(name)).copy_(t);
    std::lock_guard<std::mutex> lock(mutex_);
    version_ = spec["version"].get<int64_t>();
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
      const DLTensor& t = *it->second;
      if ((t.device.device_type != kDLCPU && t.device.device_type != kDLCUDA) || t.dtype.lanes != 1 ||
          (t.dtype.code != kDLFloat && t.dtype.code != kDLBfloat))
        throw sdk::invalid_argument("update_weights_from_tensors: '" + name + "' must be a floating-point CPU or CUDA tensor");
      if (t.device.device_type == kDLCUDA && !torch::cuda::is_available())
        throw sdk::invalid_argument("update_weights_from_tensors: '" + name + "' is a CUDA tensor but this engine's libtorch has no CUDA");
      if (t.strides != nullptr) throw sdk::invalid_argument("update_weights_from_tensors: '" + name + "' must be contiguous");
      const std::vector<int64_t> shape(t.shape, t.shape + t.ndim);
      if (c10::IntArrayRef(shape) != param.sizes())
        throw sdk::invalid_argument("update_weights_from_tensors: '" + name + "' has the wrong shape");
      torch::Dtype dt;
      if (t.dtype.code == kDLBfloat && t.dtype.bits == 16) dt = torch::kBFloat16;
      else if (t.dtype.bits == 16) dt = torch::kFloat16;
      else if (t.dtype.bits == 32) dt = torch::kFloat32;
      else if (t.dtype.bits == 64) dt = torch::kFloat64;
      else throw sdk::invalid_argument("update_weights_from_tensors: '" + name + "' has an unsupported float width");
      // A CUDA source on this engine's GPU is copied device to device, with no host round trip.
      const torch::Device src = t.device.device_type == kDLCUDA ? torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(t.device.device_id))
                                                                : torch::Device(torch::kCPU);
      copies.emplace_back(param, torch::from_blob(static_cast<char*>(t.data) + t.byte_offset, shape, torch::TensorOptions().dtype(dt).device(src)));
    }
    // Between two decode steps, all at once.
    std::lock_guard<std::mutex> step(step_mutex_);
    torch::NoGradGuard no_grad;
    for (auto& [dst, src] : copies) const_cast<torch::Tensor&>(dst).copy_(src);
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
                {"peak_device_memory_bytes", areal::torch_model::peak_memory_bytes(device_)}}
        .dump();
  }

 private:
  // Raw log-probs of the last hidden row(s): [B, V] in float64 on the host, for sampling.
  torch::Tensor log_probs(const torch::Tensor& hidden) const {
    return torch::log_softmax(model_->logits(hidden).to(torch::kFloat64), -1).to(torch::kCPU);
  }

  // Room for `tokens` keys in every slot: the cache grows (to a multiple of
  // 64, at least doubling, at most max_context) and keeps what it holds.
  void ensure_capacity(int64_t tokens) {
    if (tokens <= capacity_) return;
    const auto& c = model_->config();
    const int64_t grown = std::min(max_context_, (std::max(tokens, 2 * capacity_) + 63) / 64 * 64);
    const int64_t cap = std::max(tokens, grown);
    // Zeros, not garbage: masked keys get weight 0, and 0 * NaN would not be 0.
    const auto opts = torch::TensorOptions().dtype(dtype_).device(device_);
    for (auto* cache : {&k_cache_, &v_cache_}) {
      cache->resize(static_cast<size_t>(c.num_hidden_layers));
      for (auto& t : *cache) {
        torch::Tensor bigger = torch::zeros({max_batch_, cap, c.num_key_value_heads, c.head_dim}, opts);
        if (t.defined()) bigger.narrow(1, 0, capacity_).copy_(t);
        t = bigger;
      }
    }
    capacity_ = cap;
  }

  void prefill(Request& r) {
    const auto& c = model_->config();
    const int64_t S = static_cast<int64_t>(r.prompt.size());
    r.slot = free_slots_.back();  // admission keeps at most max_batch requests active
    free_slots_.pop_back();
    ensure_capacity(S);
    std::vector<int64_t> ids(r.prompt.begin(), r.prompt.end());
    const torch::Tensor positions = torch::arange(S, torch::TensorOptions().dtype(torch::kInt64).device(device_));
    torch::Tensor x = torch::embedding(model_->p("model.embed_tokens.weight"), torch::tensor(ids, torch::kInt64).to(device_));
    for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
      const std::string pre = "model.layers." + std::to_string(l) + ".";
      torch::Tensor q, k, v;
      model_->qkv(l, model_->rms_norm(x, model_->p(pre + "input_layernorm.weight")), positions, q, k, v);
      k_cache_[l].select(0, r.slot).narrow(0, 0, S).copy_(k);
      v_cache_[l].select(0, r.slot).narrow(0, 0, S).copy_(v);
      x = x + model_->attend(l, q, k, v, 0);
      x = x + model_->mlp(l, model_->rms_norm(x, model_->p(pre + "post_attention_layernorm.weight")));
    }
    r.length = S;
    const torch::Tensor h = model_->rms_norm(x.narrow(0, S - 1, 1), model_->p("model.norm.weight"));
    emit(r, log_probs(h)[0]);
  }

  // One token for every active request.
  void decode(std::vector<std::shared_ptr<Request>>& batch) {
    const auto& c = model_->config();
    const int64_t B = static_cast<int64_t>(batch.size());
    std::vector<int64_t> tokens(B), pos(B), slots(B);
    int64_t longest = 0;
    for (int64_t b = 0; b < B; ++b) {
      tokens[b] = batch[b]->last, pos[b] = batch[b]->length, slots[b] = batch[b]->slot;
      longest = std::max(longest, pos[b] + 1);
    }
    ensure_capacity(longest);
    const torch::Tensor positions = torch::tensor(pos, torch::kInt64).to(device_), slot_ids = torch::tensor(slots, torch::kInt64).to(device_);
    const torch::Tensor keys = positions + 1;  // each row sees its cache and the new token
    torch::Tensor x = torch::embedding(model_->p("model.embed_tokens.weight"), torch::tensor(tokens, torch::kInt64).to(device_));
    for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
      const std::string pre = "model.layers." + std::to_string(l) + ".";
      torch::Tensor q, k, v;
      model_->qkv(l, model_->rms_norm(x, model_->p(pre + "input_layernorm.weight")), positions, q, k, v);
      k_cache_[l].index_put_({slot_ids, positions}, k);
      v_cache_[l].index_put_({slot_ids, positions}, v);
      const torch::Tensor kb = k_cache_[l].narrow(1, 0, longest).index_select(0, slot_ids);
      const torch::Tensor vb = v_cache_[l].narrow(1, 0, longest).index_select(0, slot_ids);
      x = x + model_->attend_cached(l, q, kb, vb, keys);
      x = x + model_->mlp(l, model_->rms_norm(x, model_->p(pre + "post_attention_layernorm.weight")));
    }
    for (auto& r : batch) ++r->length;
    const torch::Tensor lp = log_probs(model_->rms_norm(x, model_->p("model.norm.weight")));
    for (int64_t b = 0; b < B; ++b) emit(*batch[b], lp[b]);
  }

  // Samples the next token of `r` from its raw log-prob row and delivers it
  // with its log-prob under the sampling distribution (the ABI's convention).
  void emit(Request& r, const torch::Tensor& raw_row) {
    const torch::Tensor row = r.reshaped() ? reshape(r, raw_row) : raw_row;
    if (!row.defined()) {
      r.finish = AREAL_FINISH_STOP;
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
    const float lp = static_cast<float>(raw_logprobs_ ? raw_row[tok].item<double>() : lp_scaled);
    int64_t version;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      version = version_;
    }
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
      r.text += r.decoder->push(tok);
      for (const auto& ss : r.stop_strings)
        if (r.text.find(ss) != std::string::npos) r.finish = AREAL_FINISH_STOP;
    }
    if (stop_id) r.finish = AREAL_FINISH_STOP;
    else if (r.finish == 0 && r.generated >= r.limit) r.finish = AREAL_FINISH_LENGTH;
  }

  // The distribution actually sampled from, as normalised log-probs: the
  // raw row with logit_bias, OpenAI's penalties (on tokens generated so far)
  // and the structured-output mask applied. Undefined when the mask leaves
  // nothing (only after a complete output with ignore_eos): the request ends.
  torch::Tensor reshape(Request& r, const torch::Tensor& raw_row) {
    torch::Tensor row = raw_row.clone().contiguous();
    double* q = row.data_ptr<double>();
    for (const auto& [id, bias] : r.logit_bias) q[id] += bias;
    const auto& s = r.sampling;
    for (const auto& [id, count] : r.generated_counts) q[id] -= s.frequency_penalty * count + (count > 0 ? s.presence_penalty : 0.0f);
    if (r.matcher) {
      r.trie->allowed_tokens(*r.matcher, allowed_);
      if (r.matcher->complete()) {
        for (int32_t id : r.stop_ids) allowed_[id] = 1;
        if (!s.ignore_eos && model_->config().eos_token_id >= 0) allowed_[model_->config().eos_token_id] = 1;
      }
      const double kMasked = -std::numeric_limits<double>::infinity();
      bool any = false;
      for (size_t i = 0; i < allowed_.size(); ++i) {
        if (allowed_[i]) any = true;
        else q[i] = kMasked;
      }
      if (!any) return torch::Tensor();  // nothing can follow (a complete output under ignore_eos): the output ends
    }
    return torch::log_softmax(row, 0);
  }

  void schedule() {
    torch::NoGradGuard no_grad;
    while (true) {
      std::vector<std::shared_ptr<Request>> admitted;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        cv_.wait(lock, [&] { return stopping_ || (!paused_ && (!queue_.empty() || !active_.empty())); });
        if (stopping_) return;
        while (!queue_.empty() && active_.size() + admitted.size() < static_cast<size_t>(max_batch_)) {
          admitted.push_back(queue_.front());
          queue_.pop_front();
        }
      }
      std::lock_guard<std::mutex> step(step_mutex_);
      for (auto& r : admitted) {
        if (!r->aborted) prefill(*r);
        std::lock_guard<std::mutex> lock(mutex_);
        active_.push_back(r);
      }
      std::vector<std::shared_ptr<Request>> running;
      for (auto& r : active_)
        if (!r->aborted && r->finish == 0 && r->generated > 0) running.push_back(r);
      // Requests admitted this round already produced their first token in prefill.
      std::vector<std::shared_ptr<Request>> step_batch;
      for (auto& r : running)
        if (std::find(admitted.begin(), admitted.end(), r) == admitted.end()) step_batch.push_back(r);
      if (!step_batch.empty()) decode(step_batch);
      finish_done();
    }
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
      if (r->slot >= 0) free_slots_.push_back(r->slot);
      r->slot = -1;
    }
    if (free_slots_.size() == static_cast<size_t>(max_batch_)) {  // idle: give the cache's memory back
      k_cache_.clear();
      v_cache_.clear();
      capacity_ = 0;
    }
    for (auto& r : done) r->sink.on_done(r->sink.ctx, r->finish, nullptr);
  }

  std::unique_ptr<areal::torch_model::DecoderModel> model_;
  std::mutex trie_mutex_;
  std::unique_ptr<areal::structured_output::VocabularyTrie> trie_;
  std::vector<uint8_t> allowed_;  // scheduler thread's scratch mask
  // The KV cache (scheduler thread only): per layer [max_batch, capacity_, kv_heads, head_dim].
  std::vector<torch::Tensor> k_cache_, v_cache_;
  int64_t capacity_ = 0;
  std::vector<int> free_slots_;
  std::shared_ptr<const areal::tokenizer::Tokenizer> tokenizer_;
  torch::Dtype dtype_ = torch::kFloat32;
  torch::Device device_ = torch::kCPU;
  std::string path_, name_;
  int max_batch_ = 8;
  bool raw_logprobs_ = false;
  int64_t max_context_ = 4096, version_ = 0;

  std::mutex mutex_;       // queue, active set, ids, flags, version
  std::mutex step_mutex_;  // held while the model computes; weight updates wait for it
  std::condition_variable cv_;
  bool paused_ = false, stopping_ = false;
  std::deque<std::shared_ptr<Request>> queue_;
  std::vector<std::shared_ptr<Request>> active_;
  std::set<uint64_t> ids_;
  std::thread thread_;
};

}  // namespace

AREAL_EXPORT_INFERENCE(LocalInference)
