#include "plugins/gateway/proxy/chat_service.hpp"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <cstdint>
#include <exception>

#include "core/plugin_host/error.hpp"
#include "core/plugin_host/generation.hpp"
#include "core/structured_output/json_schema_matcher.hpp"
#include "core/text/json_depth.hpp"
#include "core/text/random_text.hpp"

namespace areal::proxy {
namespace {

using J = nlohmann::ordered_json;

int32_t config_token_id(const tokenizer::Tokenizer& tok, const char* key) {
  const auto& c = tok.config();
  if (!c.is_object() || !c.contains(key) || c[key].is_null()) return -1;
  const auto& v = c[key];
  const std::string text = v.is_string() ? v.get<std::string>() : v.value("content", std::string());
  return text.empty() ? -1 : tok.token_to_id(text);
}

// Collects one request's tokens, decodes as it goes, and asks the backend to
// stop when a stop string appears.
class StreamingSink {
 public:
  StreamingSink(std::shared_ptr<const tokenizer::Tokenizer> tok, std::vector<std::string> stops,
                const std::vector<int32_t>& stop_ids, std::function<void(const std::string&)> on_delta)
      : decoder_(tok, false), stops_(std::move(stops)), stop_ids_(stop_ids), on_delta_(std::move(on_delta)) {
    for (const auto& s : stops_) hold_ = std::max(hold_, s.size() - 1);
    sink_ = {AREAL_OFFSET_OF_END(areal_gen_sink, on_routing), this, &StreamingSink::on_tokens, &StreamingSink::on_done, &StreamingSink::on_routing};
  }
  const areal_gen_sink* sink() const { return &sink_; }

  void wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [&] { return done_; });
  }

  std::vector<int32_t> ids;
  std::vector<float> logprobs;
  std::vector<int64_t> versions;
  std::string text;  // decoded so far
  int32_t finish = 0;
  std::string error;
  int32_t error_code = 0;
  bool stop_string_hit = false;
  std::string stop_string;
  size_t emitted = 0;  // bytes of `text` passed to on_delta
  std::string delta_error;
  std::string sink_error;  // decoding failed inside a callback: the request fails
  recorder::ExpertRouting routing;

 private:
  // Both callbacks run on the backend's thread, across the C ABI: nothing
  // may escape them. A failure while decoding ends this request (recorded as
  // failed, the client answered 500), never the backend or the process.
  static areal_status* on_tokens(void* ctx, const areal_gen_chunk* c) {
    auto* self = static_cast<StreamingSink*>(ctx);
    std::lock_guard<std::mutex> lock(self->mutex_);
    try {
      return self->take(c);
    } catch (const std::exception& e) {
      if (self->sink_error.empty()) self->sink_error = e.what();
    } catch (...) {
      if (self->sink_error.empty()) self->sink_error = "unknown exception";
    }
    return make_status(AREAL_CODE_INTERNAL, "decoding the output failed: " + self->sink_error);
  }
  areal_status* take(const areal_gen_chunk* c) {
    auto* self = this;
    for (size_t i = 0; i < c->count; ++i) {
      const int32_t id = c->token_ids[i];
      self->ids.push_back(id);
      self->logprobs.push_back(c->logprobs[i]);
      self->versions.push_back(c->versions[i]);
      if (std::find(self->stop_ids_.begin(), self->stop_ids_.end(), id) != self->stop_ids_.end()) continue;  // not text
      self->text += self->decoder_.push(id);
    }
    for (const auto& s : self->stops_) {
      const size_t at = self->text.find(s);
      if (at != std::string::npos) {
        self->text.resize(at);
        self->stop_string_hit = true;
        self->stop_string = s;
      }
    }
    self->flush(self->stop_string_hit ? self->text.size() : (self->text.size() > self->hold_ ? self->text.size() - self->hold_ : 0));
    if (self->stop_string_hit) return make_status(AREAL_CODE_CANCELLED, "stop string reached");
    return nullptr;
  }
  static void on_routing(void* ctx, const areal_routing* r) {
    auto* self = static_cast<StreamingSink*>(ctx);
    std::lock_guard<std::mutex> lock(self->mutex_);
    try {
      self->routing = recorder::copy_routing(*r);
    } catch (const std::exception& e) {
      if (self->sink_error.empty()) self->sink_error = std::string("the backend's routing: ") + e.what();
    }
  }
  static void on_done(void* ctx, int32_t reason, const areal_status* error) {
    auto* self = static_cast<StreamingSink*>(ctx);
    {
      std::lock_guard<std::mutex> lock(self->mutex_);
      try {
        if (!self->stop_string_hit && self->sink_error.empty()) {
          self->text += self->decoder_.finish();
          self->flush(self->text.size());
        }
      } catch (const std::exception& e) {
        self->sink_error = e.what();
      } catch (...) {
        self->sink_error = "unknown exception";
      }
      self->finish = reason;
      if (error != nullptr) {
        self->error = std::string(status_message(error));
        self->error_code = status_code(error);
      }
      self->done_ = true;
      // Under the lock: once wait() sees done_ the sink may be gone.
      self->cv_.notify_all();
    }
  }
  // Passes text up to `upto` to the stream; a failing stream (client gone)
  // is remembered, and generation still completes and is recorded.
  void flush(size_t upto) {
    if (!on_delta_ || upto <= emitted || !delta_error.empty()) return;
    // Never split a UTF-8 character between two deltas.
    while (upto > emitted && upto < text.size() && (static_cast<unsigned char>(text[upto]) & 0xC0) == 0x80) --upto;
    try {
      on_delta_(text.substr(emitted, upto - emitted));
    } catch (const std::exception& e) {
      delta_error = e.what();
    }
    emitted = upto;
  }

  tokenizer::IncrementalDecoder decoder_;
  std::vector<std::string> stops_;
  const std::vector<int32_t>& stop_ids_;
  std::function<void(const std::string&)> on_delta_;
  size_t hold_ = 0;
  areal_gen_sink sink_{};
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
};

}  // namespace

ChatService::ChatService(std::shared_ptr<const tokenizer::Tokenizer> tok, std::shared_ptr<const jinja::ChatTemplate> chat_template,
                         const areal_inference_ref* inference, ChatServiceConfig config)
    : tok_(std::move(tok)),
      template_(std::move(chat_template)),
      template_messages_(*template_),
      inference_(inference),
      adapters_(std::make_unique<AdapterNames>(inference)),
      config_(std::move(config)) {
  if (config_.prompt_mode != "hf" && config_.prompt_mode != "concat")
    throw Error(AREAL_CODE_INVALID_ARGUMENT, "prompt_mode must be hf or concat, got '" + config_.prompt_mode + "'");
  turn_end_id_ = config_token_id(*tok_, "eos_token");
  if (turn_end_id_ >= 0) stop_ids_.push_back(turn_end_id_);
  const int32_t pad = config_token_id(*tok_, "pad_token");
  if (pad >= 0 && pad != turn_end_id_) stop_ids_.push_back(pad);
  if (stop_ids_.empty()) throw Error(AREAL_CODE_INVALID_ARGUMENT, "tokenizer_config.json names no eos_token: the proxy cannot tell where a turn ends");
  // "auto" parsers are chosen once from the chat template (its source, and
  // whether its generation prompt opens <think>); the names are checked here,
  // not at the first request.
  std::string generation_prompt, thinking_off_prompt;
  try {
    const J hi = J::array({{{"role", "user"}, {"content", "Hi"}}});
    generation_prompt = template_->render(hi, nullptr, true);
    thinking_off_prompt = template_->render(hi, nullptr, true, J{{"enable_thinking", false}});
  } catch (const std::exception&) {
    // A template that wants more than one user message: the source alone decides.
  }
  config_.parsers = resolve_parsers(config_.parsers, template_->source(), generation_prompt, thinking_off_prompt);
}

OutputParserConfig ChatService::parsers_for(const ChatRequest& req) const { return parsers_for_request(config_.parsers, req.chat_template_kwargs); }

std::vector<int32_t> ChatService::build_prompt(const ChatRequest& req, const std::shared_ptr<Session>& session, int continues,
                                               bool* concat_linked) const {
  *concat_linked = false;
  const J messages = template_messages_.prepare(req.messages, config_.on_template_rewrite);
  const std::string rendered = template_->render(messages, req.tools, true, req.chat_template_kwargs);
  std::vector<int32_t> full = tok_->encode(rendered, false);
  if (!session || (config_.prompt_mode != "concat" && continues < 0)) return full;
  const int parent_index = continues >= 0 ? continues : session->record.find_parent(req.messages);
  if (parent_index < 0) return full;
  const recorder::Interaction parent = session->record.get(static_cast<size_t>(parent_index));
  // A system text that arrived after the parent was folded into the first
  // message, inside the parent's tokens: linking would lose it.
  if (template_messages_.folds_inline_system && parent.messages.is_array() &&
      TemplateMessages::system_texts(parent.messages) != TemplateMessages::system_texts(req.messages))
    return full;
  std::vector<int32_t> prefix = parent.prompt_ids;
  prefix.insert(prefix.end(), parent.output_ids.begin(), parent.output_ids.end());
  // The turn delimiter closes the parent's turn even if it stopped on length.
  if (parent.output_ids.empty() || parent.output_ids.back() != turn_end_id_) prefix.push_back(turn_end_id_);
  const auto k = std::count(prefix.begin(), prefix.end(), turn_end_id_);
  int64_t seen = 0;
  for (size_t i = 0; i < full.size(); ++i) {
    if (full[i] == turn_end_id_ && ++seen == k) {
      prefix.insert(prefix.end(), full.begin() + static_cast<std::ptrdiff_t>(i) + 1, full.end());
      *concat_linked = true;
      return prefix;
    }
  }
  return full;  // the template does not line up with the stored turns: fall back to a fresh render
}

Generated ChatService::generate_tokens(std::vector<int32_t> prompt, const ChatRequest& req) {
  return generate(std::move(prompt), req, "", nullptr);
}

Generated ChatService::generate(std::vector<int32_t> prompt, const ChatRequest& req, const std::string& affinity_key,
                                const std::function<void(const std::string&)>& on_delta) {
  if (inference_ == nullptr) throw Error(AREAL_CODE_UNAVAILABLE, "no inference backend is configured");
  const int64_t max_new = new_token_budget(prompt.size(), req);
  areal_sampling_params s{};
  s.struct_size = AREAL_OFFSET_OF_END(areal_sampling_params, json_schema);
  s.temperature = req.temperature;
  s.top_p = req.top_p;
  s.top_k = req.top_k;
  s.max_new_tokens = static_cast<int32_t>(std::min<int64_t>(max_new, INT32_MAX));
  s.seed = req.seed.value_or(0);
  s.has_seed = req.seed.has_value();
  std::vector<int32_t> stop_ids = stop_ids_;
  stop_ids.insert(stop_ids.end(), req.stop_token_ids.begin(), req.stop_token_ids.end());
  s.stop_token_ids = stop_ids.data();
  s.stop_token_ids_count = stop_ids.size();
  s.frequency_penalty = req.frequency_penalty;
  s.presence_penalty = req.presence_penalty;
  std::vector<areal_logit_bias> bias;
  for (const auto& [id, b] : req.logit_bias) bias.push_back({id, b});
  s.logit_bias = bias.empty() ? nullptr : bias.data();
  s.logit_bias_count = bias.size();
  s.structured_output = req.structured_output;
  s.json_schema = areal_str{req.json_schema.data(), req.json_schema.size()};
  // The request's `model` chooses a LoRA adapter when it names one the backend
  // serves, unless the gateway serves one adapter only (gateway.adapter).
  const std::string adapter = !config_.adapter.empty()             ? config_.adapter
                              : req.model == config_.model_name ? std::string()
                                                                : adapters_->adapter_for(req.model);
  areal_gen_request r{};
  r.struct_size = AREAL_OFFSET_OF_END(areal_gen_request, record_routing);
  r.record_routing = config_.record_routing ? 1 : 0;
  r.request_id = next_request_id();
  r.adapter = areal_str{adapter.data(), adapter.size()};
  // A session's calls go to one server of a multi-server backend (its KV cache holds the prefix).
  r.affinity_key = areal_str{affinity_key.data(), affinity_key.size()};
  r.input_ids = prompt.data();
  r.input_ids_count = prompt.size();
  r.sampling = &s;
  StreamingSink sink(tok_, req.stop, stop_ids, on_delta);
  throw_if_status(inference_->vtable->submit(inference_->self, &r, sink.sink()), "inference backend");
  sink.wait();
  if (!sink.sink_error.empty()) throw Error(AREAL_CODE_INTERNAL, "decoding the output failed: " + sink.sink_error);
  if (sink.finish == AREAL_FINISH_ERROR) {
    // A request the backend refused (e.g. a server's 400 for a prompt over its
    // context) is the client's mistake; anything else is a dead backend (502).
    if (sink.error_code == AREAL_CODE_INVALID_ARGUMENT) throw Error(AREAL_CODE_INVALID_ARGUMENT, "the inference backend refused the request: " + sink.error);
    throw Error(AREAL_CODE_UNAVAILABLE, "inference backend failed: " + sink.error);
  }
  // An abort the gateway did not ask for (a stop string's is stop_string_hit)
  // is the backend stopping: the reply is cut short wherever it was, and
  // recording it as a `length` finish would train on a cut the model never made.
  if (sink.finish == AREAL_FINISH_ABORT && !sink.stop_string_hit)
    throw Error(AREAL_CODE_UNAVAILABLE, "the inference backend aborted this generation after " + std::to_string(sink.ids.size()) +
                                            " tokens (it is stopping or was told to abort); it is not recorded, retry it");
  Generated g;
  g.prompt_ids = std::move(prompt);
  g.output_ids = std::move(sink.ids);
  g.logprobs = std::move(sink.logprobs);
  g.versions = std::move(sink.versions);
  g.text = std::move(sink.text);
  if (config_.record_routing) {
    // Kept only when it covers the call (prompt + output - 1 positions), as the
    // recorder and the trainer take it; a backend that reported none leaves the
    // call unrouted, and the trainer's router then chooses for it.
    if (!sink.routing.empty() && sink.routing.positions() + 1 == g.prompt_ids.size() + g.output_ids.size())
      g.routing = std::move(sink.routing);
    else if (config_.on_unrouted_call)
      config_.on_unrouted_call();
  }
  g.stop_string = sink.stop_string;
  const bool stopped = sink.finish == AREAL_FINISH_STOP || sink.stop_string_hit;
  g.finish_reason = stopped ? "stop" : "length";
  return g;
}

int64_t ChatService::new_token_budget(size_t prompt_tokens, const ChatRequest& req) const {
  const int64_t room = config_.max_context - static_cast<int64_t>(prompt_tokens);
  if (room <= 0)
    throw Error(AREAL_CODE_INVALID_ARGUMENT, "'messages': the prompt is " + std::to_string(prompt_tokens) +
                                                 " tokens, which leaves no room in the context of " + std::to_string(config_.max_context));
  int64_t max_new = std::min<int64_t>(req.max_tokens.value_or(config_.default_max_tokens), room);
  if (config_.max_completion_tokens > 0) max_new = std::min(max_new, config_.max_completion_tokens);
  if (req.max_total_tokens) {
    max_new = std::min<int64_t>(max_new, *req.max_total_tokens - static_cast<int64_t>(prompt_tokens));
    if (max_new <= 0)
      throw Error(AREAL_CODE_INVALID_ARGUMENT, "'max_total_tokens': the prompt is " + std::to_string(prompt_tokens) +
                                                   " tokens, which leaves no room under max_total_tokens " + std::to_string(*req.max_total_tokens));
  }
  return max_new;
}

size_t ChatService::count_prompt_tokens(const ChatRequest& req) const {
  bool linked = false;
  const std::string forced = forced_prefix(req);
  return build_prompt(req, nullptr, -1, &linked).size() + (forced.empty() ? 0 : tok_->encode(forced, false).size());
}

ForcedCallGrammar ChatService::forced_call_grammar(const ChatRequest& req) const {
  ForcedCallGrammar g = forced_tool_call_grammar(parsers_for(req), req.tool_choice == "function" ? req.forced_tool : "", req.tools);
  if (!g.constrained) return g;
  try {  // a tool schema the compiler does not take: the call is prompted, not constrained
    structured_output::Schema::compile(text::parse_json_bounded(g.schema.dump()));
  } catch (const std::exception&) {
    g.constrained = false;
    g.prefix = forced_tool_call_prefix(parsers_for(req), req.tool_choice == "function" ? req.forced_tool : "");
    g.suffix.clear();
  }
  return g;
}

std::string ChatService::forced_prefix(const ChatRequest& req) const {
  if (req.forces_tool_call()) return forced_call_grammar(req).prefix;
  if (req.structured_output != AREAL_STRUCTURED_NONE) return structured_output_prefix(parsers_for(req));
  return "";
}

ChatRequest choice_request(const ChatRequest& req, int32_t choice) {
  if (choice == 0 || !req.seed) return req;
  ChatRequest r = req;
  *r.seed += static_cast<uint64_t>(choice);  // the same seed would sample the same reply n times
  return r;
}

std::string new_call_id(const std::string& prefix) { return prefix + text::random_hex(29); }

std::string choice_call_id(const std::string& response_id, int32_t choice) {
  return choice == 0 ? response_id : response_id + "-" + std::to_string(choice);
}

ChatService::Completed ChatService::run(const ChatRequest& req, const std::shared_ptr<Session>& session, const std::string& call_id,
                                        const std::function<void(const std::string&)>& on_delta, int continues,
                                        const std::function<void(size_t prompt_tokens)>& on_start) {
  if (call_id.empty()) throw Error(AREAL_CODE_INTERNAL, "ChatService::run: no call id");
  Completed c;
  c.id = call_id;
  bool linked = false;
  std::vector<int32_t> prompt = build_prompt(req, session, continues, &linked);
  // A forced tool call or a structured reply after an opened <think>: the
  // opening is prompt, the model samples the rest. A forced call is
  // constrained decoding where the family's call is JSON: the model can only
  // sample a call of an offered tool with arguments its schema accepts.
  ForcedCallGrammar grammar;
  if (req.forces_tool_call()) grammar = forced_call_grammar(req);
  const std::string forced = req.forces_tool_call() ? grammar.prefix : forced_prefix(req);
  ChatRequest constrained;
  if (grammar.constrained) {
    constrained = req;
    constrained.structured_output = AREAL_STRUCTURED_JSON_SCHEMA;
    constrained.json_schema = grammar.schema.dump();
  }
  const ChatRequest& sampled = grammar.constrained ? constrained : req;
  if (!forced.empty()) {
    const std::vector<int32_t> ids = tok_->encode(forced, false);
    prompt.insert(prompt.end(), ids.begin(), ids.end());
  }
  // What refuses the request refuses it here, before it is recorded or a
  // stream starts: the client gets a 4xx status, streamed or not.
  (void)new_token_budget(prompt.size(), req);
  // Recorded at arrival (AReaL's order); completed below even if the client left.
  const bool record = session != nullptr;  // the admin key is served, not recorded
  size_t index = 0;
  if (record) index = session->record.insert(c.id, req.messages);
  if (on_start) {
    try {
      on_start(prompt.size());
    } catch (const std::exception&) {
      // The client left; the call is still generated and recorded.
    }
  }
  try {
    if (!forced.empty() && on_delta) {  // the stream shows the call whole
      try {
        on_delta(forced);
      } catch (const std::exception&) {
        // The client left; the call is still generated and recorded.
      }
    }
    c.gen = generate(std::move(prompt), sampled, session ? session->id : std::string(), on_delta);
  } catch (...) {
    if (record) session->record.fail(index);  // the client gets the error; the session stays consistent
    throw;
  }
  c.gen.concat_linked = linked;
  c.gen.forced_prefix = forced;
  std::string text = forced + c.gen.text;
  // A constrained call that ended on its own is complete JSON: its closing
  // (never sampled) lets the parser read it. One cut by length stays text.
  if (grammar.constrained && c.gen.finish_reason == "stop" && c.gen.stop_string.empty()) {
    text += grammar.suffix;
    if (on_delta && !grammar.suffix.empty()) {
      try {
        on_delta(grammar.suffix);  // the stream's splitter then sees the call whole
      } catch (const std::exception&) {
        // The client left; the call is still recorded.
      }
    }
  }
  c.parsed = parse_output(text, parsers_for(req), req.tools_enabled(), req.tool_call_id_prefix, req.tools);
  c.finish_reason = c.gen.finish_reason;
  c.message = {{"role", "assistant"}, {"content", c.parsed.content}};
  if (c.parsed.has_reasoning) c.message["reasoning_content"] = c.parsed.reasoning;
  if (!c.parsed.tool_calls.empty()) {
    J calls = J::array();
    for (const auto& t : c.parsed.tool_calls)
      calls.push_back({{"id", t.id}, {"type", "function"}, {"function", {{"name", t.name}, {"arguments", t.arguments}}}});
    c.message["tool_calls"] = calls;
    if (c.finish_reason == "stop") c.finish_reason = "tool_calls";
  }
  if (record) {
    session->record.complete(index, c.message, c.gen.prompt_ids, c.gen.output_ids, c.gen.logprobs, c.gen.versions, c.finish_reason, linked,
                             c.gen.routing);
    c.recorded = index;
  }
  return c;
}

J ChatService::usage(const Completed& c) const {
  return {{"prompt_tokens", c.gen.prompt_ids.size()},
          {"completion_tokens", c.gen.output_ids.size()},
          {"total_tokens", c.gen.prompt_ids.size() + c.gen.output_ids.size()}};
}

J ChatService::logprobs_json(const Completed& c) const {
  J content = J::array();
  for (size_t i = 0; i < c.gen.output_ids.size(); ++i) {
    const std::string bytes = tok_->byte_level_decoding() ? tok_->token_bytes(c.gen.output_ids[i]) : tok_->decode({c.gen.output_ids[i]});
    J byte_list = J::array();
    for (unsigned char b : bytes) byte_list.push_back(b);
    content.push_back({{"token", tok_->decode({c.gen.output_ids[i]})}, {"logprob", c.gen.logprobs[i]}, {"bytes", byte_list}, {"top_logprobs", J::array()}});
  }
  return {{"content", content}};
}

J ChatService::complete(const ChatRequest& req, const std::shared_ptr<Session>& session, const std::string& id) {
  J choices = J::array();
  size_t prompt_tokens = 0, completion_tokens = 0;
  std::vector<size_t> recorded;  // the choices so far, by record index
  for (int32_t i = 0; i < req.n; ++i) {
    Completed c;
    try {
      c = run(choice_request(req, i), session, choice_call_id(id, i), nullptr);
    } catch (...) {
      // The client gets the error and never sees the earlier choices' ids:
      // they are no calls of its session (not exported, no target of a
      // reward for "the last call"), as a call whose client got an error.
      for (size_t k : recorded) session->record.fail(k);
      throw;
    }
    if (c.recorded) recorded.push_back(*c.recorded);
    if (i == 0) prompt_tokens = c.gen.prompt_ids.size();
    completion_tokens += c.gen.output_ids.size();
    J message = c.message;
    // A call with no text before it answers content null, as OpenAI and vLLM do
    // (clients that send the message back then send null, which we serve).
    if (message.contains("tool_calls") && message["content"] == "") message["content"] = nullptr;
    choices.push_back({{"index", i}, {"message", message}, {"logprobs", req.logprobs ? logprobs_json(c) : J(nullptr)}, {"finish_reason", c.finish_reason}});
  }
  return {{"id", id},
          {"object", "chat.completion"},
          {"created", std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count()},
          {"model", req.model.empty() ? config_.model_name : req.model},
          {"choices", choices},
          {"usage", {{"prompt_tokens", prompt_tokens}, {"completion_tokens", completion_tokens}, {"total_tokens", prompt_tokens + completion_tokens}}}};
}

}  // namespace areal::proxy
