// Serves one chat completion: prompt -> tokens -> generation -> parsed
// OpenAI response, recording every token in the caller's session.
//
// Prompt modes:
//   hf:     render the whole conversation with the chat template and tokenize
//           (what transformers' apply_chat_template does each turn);
//   concat: if the conversation continues an earlier call of the session,
//           start from that call's exact prompt + sampled ids and append only
//           the template's rendering of the new messages (located by
//           counting turn-end tokens), so a multi-turn conversation's ids are
//           never re-tokenized and export as one row.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>
#include <cstdint>

#include "plugins/gateway/proxy/adapter_names.hpp"
#include "plugins/gateway/proxy/chat_request.hpp"
#include "plugins/gateway/proxy/output_parser.hpp"
#include "plugins/gateway/proxy/session_store.hpp"
#include "plugins/gateway/proxy/template_messages.hpp"
#include "core/hf/chat_template/chat_template.hpp"
#include "core/hf/tokenizer/tokenizer.hpp"
#include "core/recorder/expert_routing.hpp"
#include "areal/plugin_api.h"

namespace areal::proxy {

// The request for choice `choice` of an n-choice request: with a seed,
// choice i samples with seed + i.
ChatRequest choice_request(const ChatRequest& req, int32_t choice);

// A fresh id for a call the client will see: `prefix` + 29 hex digits
// ("chatcmpl-", "msg_", "resp_"). The route mints it, the client receives
// it, and the call is recorded under it, so set_reward finds what the
// client was given.
std::string new_call_id(const std::string& prefix);

// The recorded id of choice `choice` of a response with id `response_id`:
// choice 0 is the response id itself, choice i > 0 is "<response_id>-<i>".
std::string choice_call_id(const std::string& response_id, int32_t choice);

struct ChatServiceConfig {
  std::string prompt_mode = "hf";  // "hf" | "concat"
  int64_t default_max_tokens = 1024;
  int64_t max_completion_tokens = 0;  // > 0: caps every request's completion budget
  int64_t max_context = 32768;     // prompt + completion
  std::string model_name = "default";
  // Non-empty: every request is generated with this LoRA adapter, whatever
  // its `model` names (a managed-service job's gateway serves its job's adapter only).
  std::string adapter;
  bool record_routing = false;  // ask the backend for MoE routing (ABI 1.7) and record it
  std::function<void()> on_unrouted_call;  // a call recorded without the routing it asked for (counted)
  // The messages were changed for the template beyond parsing tool-call
  // arguments (template_messages.hpp names the kinds; counted).
  std::function<void(const std::string&)> on_template_rewrite;
  OutputParserConfig parsers;
};

// What generation produced, before parsing.
struct Generated {
  std::vector<int32_t> prompt_ids;
  std::vector<int32_t> output_ids;
  std::vector<float> logprobs;
  std::vector<int64_t> versions;
  recorder::ExpertRouting routing;  // with record_routing: prompt + output - 1 positions
  std::string forced_prefix;  // text appended to the prompt to force a tool call (prompt tokens)
  std::string text;           // decoded output, stop token and stop string removed
  std::string finish_reason;  // "stop" | "length"
  std::string stop_string;    // the stop string that ended it, if one did
  bool concat_linked = false;
};

class ChatService {
 public:
  ChatService(std::shared_ptr<const tokenizer::Tokenizer> tok, std::shared_ptr<const jinja::ChatTemplate> chat_template,
              const areal_inference_ref* inference, ChatServiceConfig config);

  // Non-streaming completion with the response id `id` (choice i recorded
  // as choice_call_id(id, i)). `session` may be null (admin use: served, not
  // recorded). Throws areal::Error: INVALID_ARGUMENT (400) for client
  // mistakes, UNAVAILABLE (502) when the backend fails.
  // `req.n` choices, each a call of its own in the session.
  nlohmann::ordered_json complete(const ChatRequest& req, const std::shared_ptr<Session>& session, const std::string& id);

  // Streaming: `on_delta(text)` receives content as it is sampled (stop
  // strings held back until ruled out); returns the final parsed result.
  // The interaction is recorded even if the sink throws (client gone).
  struct Completed {
    std::string id;  // the call id it was recorded under (run's call_id)
    Generated gen;
    ParsedOutput parsed;
    nlohmann::ordered_json message;  // the assistant message returned
    std::string finish_reason;       // after tool-call detection
    std::optional<size_t> recorded;  // its index in the session's record (none: the admin key's calls)
  };
  // `call_id`: the id the client sees for this call; the call is recorded
  // under it (Recorder::insert: ALREADY_EXISTS if the session has it).
  // `continues`: the index of an earlier call of `session` this request
  // explicitly continues (Responses' previous_response_id): its exact prompt
  // + sampled ids are the prefix, whatever gateway.prompt_mode says.
  // `on_start` runs once the call is recorded, before generation: a stream
  // opens there, so a client that reads the opening and hangs up always
  // finds its call in the session (in flight or complete), never missing.
  Completed run(const ChatRequest& req, const std::shared_ptr<Session>& session, const std::string& call_id,
                const std::function<void(const std::string&)>& on_delta, int continues = -1, const std::function<void(size_t prompt_tokens)>& on_start = nullptr);

  // Samples a continuation of `prompt` as it is (no chat template, nothing
  // recorded) with req's sampling fields: SGLang's native /generate.
  Generated generate_tokens(std::vector<int32_t> prompt, const ChatRequest& req);

  // Prompt tokens of a request as it would be served (count_tokens).
  size_t count_prompt_tokens(const ChatRequest& req) const;

  nlohmann::ordered_json usage(const Completed& c) const;
  nlohmann::ordered_json logprobs_json(const Completed& c) const;
  const ChatServiceConfig& config() const { return config_; }
  // The output parsers for `req` (output_parser.hpp parsers_for_request):
  // a request that turns thinking off may start its reply outside <think>.
  OutputParserConfig parsers_for(const ChatRequest& req) const;
  const tokenizer::Tokenizer& tokenizer() const { return *tok_; }
  // The backend's LoRA adapters a request's `model` may name.
  AdapterNames& adapters() const { return *adapters_; }

 private:
  // How a forced tool call is sampled (output_parser.hpp), its schema checked by the compiler.
  ForcedCallGrammar forced_call_grammar(const ChatRequest& req) const;
  // Tokens the reply may have: the request's max_tokens within the context,
  // max_completion_tokens and max_total_tokens. INVALID_ARGUMENT when the
  // prompt leaves no room.
  int64_t new_token_budget(size_t prompt_tokens, const ChatRequest& req) const;
  std::vector<int32_t> build_prompt(const ChatRequest& req, const std::shared_ptr<Session>& session, int continues, bool* concat_linked) const;
  // Text the gateway appends to the prompt: a forced tool call's opening, or
  // the reasoning's close before a structured reply.
  std::string forced_prefix(const ChatRequest& req) const;
  Generated generate(std::vector<int32_t> prompt, const ChatRequest& req, const std::string& affinity_key,
                     const std::function<void(const std::string&)>& on_delta);

  std::shared_ptr<const tokenizer::Tokenizer> tok_;
  std::shared_ptr<const jinja::ChatTemplate> template_;
  TemplateMessages template_messages_;  // what the template is given, from the request's messages
  const areal_inference_ref* inference_;
  std::unique_ptr<AdapterNames> adapters_;
  ChatServiceConfig config_;
  std::vector<int32_t> stop_ids_;  // eos (turn end) and pad
  int32_t turn_end_id_ = -1;
};

}  // namespace areal::proxy
