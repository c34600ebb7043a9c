#include "engine_bridge.hpp"

#include "core/plugin_host/error.hpp"
#include "core/plugin_host/generation.hpp"
#include "core/plugin_host/host_api.hpp"
#include "core/plugin_host/plugin_catalog.hpp"

namespace areal::engine_server {

bool Generation::next(Event& out) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (drained_) return false;
  cv_.wait(lock, [&] { return !events_.empty(); });
  out = std::move(events_.front());
  events_.pop_front();
  if (out.done) drained_ = true;
  return true;
}

areal_status* Generation::on_tokens(void* ctx, const areal_gen_chunk* c) {
  auto* g = static_cast<Generation*>(ctx);
  Event e;
  e.ids.assign(c->token_ids, c->token_ids + c->count);
  e.logprobs.assign(c->logprobs, c->logprobs + c->count);
  {
    std::lock_guard<std::mutex> lock(g->mutex_);
    g->events_.push_back(std::move(e));
  }
  g->cv_.notify_all();
  return nullptr;
}

void Generation::on_done(void* ctx, int32_t finish, const areal_status* error) {
  auto* g = static_cast<Generation*>(ctx);
  Event e;
  e.done = true;
  e.finish = finish;
  if (error) e.error = std::string(status_message(error));
  {
    std::lock_guard<std::mutex> lock(g->mutex_);
    g->events_.push_back(std::move(e));
    g->finished_ = true;
  }
  g->cv_.notify_all();
  g->engine_->finished(g);
}

Engine::Engine(const std::string& plugin_dir, const std::string& plugin, const std::string& config_json, const std::string& tokenizer_dir) {
  PluginCatalog catalog(plugin_dir.empty() ? std::vector<std::string>{} : std::vector<std::string>{plugin_dir});
  plugin_ = catalog.resolve(plugin, AREAL_KIND_INFERENCE);
  services_ = make_services(instance_name_);
  instance_ = std::make_unique<PluginInstance>(plugin_, config_json, &services_);
  if (!tokenizer_dir.empty()) tokenizer_ = tokenizer::Tokenizer::from_dir(tokenizer_dir);
  const nlohmann::json i = info();
  max_context_ = i.value("max_context", int64_t{4096});
  eos_token_id_ = i.value("eos_token_id", -1);
}

Engine::~Engine() {
  abort_matching("");
  instance_.reset();
}

std::shared_ptr<Generation> Engine::generate(const std::string& rid, const std::vector<int32_t>& prompt, const SamplingRequest& s) {
  auto g = std::make_shared<Generation>();
  g->rid = rid;
  g->id = next_request_id();
  g->engine_ = this;
  g->sink_ = areal_gen_sink{AREAL_OFFSET_OF_END(areal_gen_sink, on_done), g.get(), &Generation::on_tokens, &Generation::on_done, nullptr};
  std::vector<areal_str> stops;
  for (const auto& t : s.stop_strings) stops.push_back(areal_str{t.data(), t.size()});
  areal_sampling_params p{};
  p.struct_size = AREAL_OFFSET_OF_END(areal_sampling_params, json_schema);
  p.frequency_penalty = s.frequency_penalty;
  p.presence_penalty = s.presence_penalty;
  p.logit_bias = s.logit_bias.empty() ? nullptr : s.logit_bias.data();
  p.logit_bias_count = s.logit_bias.size();
  p.structured_output = s.structured_output;
  p.json_schema = areal_str{s.json_schema.data(), s.json_schema.size()};
  p.temperature = s.temperature;
  p.top_p = s.top_p;
  p.top_k = s.top_k;
  p.max_new_tokens = s.max_new_tokens;
  p.has_seed = s.seed.has_value();
  p.seed = s.seed.value_or(0);
  p.ignore_eos = s.ignore_eos;
  p.stop_token_ids = s.stop_ids.empty() ? nullptr : s.stop_ids.data();
  p.stop_token_ids_count = s.stop_ids.size();
  p.stop_strings = stops.empty() ? nullptr : stops.data();
  p.stop_strings_count = stops.size();
  areal_gen_request r{};
  r.struct_size = AREAL_OFFSET_OF_END(areal_gen_request, adapter);
  r.adapter = areal_str{s.adapter.data(), s.adapter.size()};
  r.request_id = g->id;
  r.input_ids = prompt.data();
  r.input_ids_count = prompt.size();
  r.sampling = &p;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    live_[g->id] = g;
  }
  areal_status* st = plugin_->inference()->submit(instance_->self(), &r, &g->sink_);
  if (st != nullptr) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      live_.erase(g->id);
    }
    idle_cv_.notify_all();
    throw_if_status(st, "submit");
  }
  return g;
}

void Engine::finished(Generation* g) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    live_.erase(g->id);
  }
  idle_cv_.notify_all();
}

void Engine::abort(const std::shared_ptr<Generation>& g) {
  StatusPtr st(plugin_->inference()->abort(instance_->self(), g->id));  // NOT_FOUND: already finished
}

void Engine::abort_and_drain(const std::shared_ptr<Generation>& g) {
  abort(g);
  Event e;
  while (g->next(e)) {
  }
}

size_t Engine::abort_matching(const std::string& prefix, bool exact, bool wait) {
  std::vector<std::shared_ptr<Generation>> hit;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& [_, g] : live_)
      if (exact ? g->rid == prefix : g->rid.rfind(prefix, 0) == 0) hit.push_back(g);
  }
  for (auto& g : hit) abort(g);
  if (!wait) return hit.size();
  std::unique_lock<std::mutex> lock(mutex_);
  idle_cv_.wait(lock, [&] {
    for (auto& g : hit)
      if (live_.count(g->id)) return false;
    return true;
  });
  return hit.size();
}

void Engine::pause() {
  throw_if_status(plugin_->inference()->pause(instance_->self()), "pause");
  std::lock_guard<std::mutex> lock(mutex_);
  paused_ = true;
}

void Engine::resume() {
  throw_if_status(plugin_->inference()->resume(instance_->self()), "resume");
  std::lock_guard<std::mutex> lock(mutex_);
  paused_ = false;
}

bool Engine::paused() {
  std::lock_guard<std::mutex> lock(mutex_);
  return paused_;
}

void Engine::wait_idle() {
  std::unique_lock<std::mutex> lock(mutex_);
  idle_cv_.wait(lock, [&] { return live_.empty(); });
}

void Engine::update_weights_from_disk(const std::string& path, int64_t version) {
  const std::string spec = nlohmann::json{{"type", "disk"}, {"path", path}, {"version", version}}.dump();
  throw_if_status(plugin_->inference()->update_weights(instance_->self(), areal_str{spec.data(), spec.size()}), "update_weights");
}

namespace {
const areal_inference_vtable& adapters_of(const std::shared_ptr<LoadedPlugin>& plugin) {
  const areal_inference_vtable& inf = *plugin->inference();
  if (inf.struct_size < AREAL_OFFSET_OF_END(areal_inference_vtable, unload_adapter) || inf.load_adapter == nullptr)
    throw Error(AREAL_CODE_UNSUPPORTED, "the engine plugin '" + plugin->name() + "' serves no LoRA adapters (ABI 1.6)");
  return inf;
}
}  // namespace

void Engine::load_adapter(const std::string& name, const std::string& dir) {
  // vLLM's API carries no version: the client (the vllm plugin) keeps its own.
  const std::string spec = nlohmann::json{{"name", name}, {"path", dir}, {"version", 0}}.dump();
  throw_if_status(adapters_of(plugin_).load_adapter(instance_->self(), areal_str{spec.data(), spec.size()}, nullptr), "load_adapter");
}

void Engine::unload_adapter(const std::string& name) {
  throw_if_status(adapters_of(plugin_).unload_adapter(instance_->self(), areal_str{name.data(), name.size()}), "unload_adapter");
}

bool Engine::has_adapter(const std::string& name) {
  const nlohmann::json i = info();
  for (const auto& a : i.value("loaded_adapters", nlohmann::json::array()))
    if (a.is_object() && a.value("name", std::string()) == name) return true;
  return false;
}

nlohmann::json Engine::info() {
  std::string text;
  areal_writer w{AREAL_OFFSET_OF_END(areal_writer, write), &text, [](void* ctx, areal_str s) -> areal_status* {
                   static_cast<std::string*>(ctx)->append(s.data, s.size);
                   return nullptr;
                 }};
  throw_if_status(plugin_->inference()->info(instance_->self(), &w), "info");
  return nlohmann::json::parse(text);
}

std::string Engine::decode(const std::vector<int32_t>& ids) const { return tokenizer_ ? tokenizer_->decode(ids) : std::string(); }

}  // namespace areal::engine_server
