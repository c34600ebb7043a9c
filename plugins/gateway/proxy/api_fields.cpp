#include "plugins/gateway/proxy/api_fields.hpp"

#include <algorithm>

namespace areal::proxy {
namespace {

constexpr FieldTreatment H = FieldTreatment::kHonoured;
constexpr FieldTreatment I = FieldTreatment::kIgnored;

}  // namespace

const ApiTable& chat_completions_fields() {
  static const ApiTable t{"chat", "OpenAI Chat Completions (`/v1/chat/completions`)", {
    {"messages", H, "Required. Roles system, developer (= system), user, assistant, tool, function (= tool). Text content and text parts (`text`, `refusal`, and the Responses API's `input_text` and `output_text`), joined with newlines; image, audio and file parts (and vLLM's multimodal parts) are dropped from the prompt and counted; another part type is a 400. A part's `cache_control` is ignored. A system message's Claude Code attribution line (first line `x-anthropic-billing-header: ...`, sent by gateways that translate Claude Code's requests) is dropped and counted. Tool calls' `arguments` reach the chat template as objects (\"What the chat template is given\")."},
    {"model", H, "Echoed in the reply; the gateway serves one model."},
    {"max_tokens", H, "Completion budget; default `gateway.default_max_tokens`; capped by the context and `gateway.max_completion_tokens`. Beside `max_completion_tokens` it is ignored and counted (as at vLLM)."},
    {"max_completion_tokens", H, "Same as `max_tokens`, and counts when both are given."},
    {"temperature", H, "[0, 2]; 0 is greedy."},
    {"top_p", H, "Nucleus sampling; 0 keeps the most likely token only."},
    {"stop", H, "Up to 16 strings, enforced by the gateway for every backend; the stop string is not returned."},
    {"seed", H, "Reproducible sampling on the local and mock engines; passed to SGLang/vLLM."},
    {"logprobs", H, "Returns each sampled token's log-prob (the recorded ones)."},
    {"top_logprobs", I, "Alternatives are not produced by the backends: `top_logprobs` lists are empty."},
    {"stream", H, "Token streaming (server-sent events)."},
    {"stream_options", H, "`include_usage` adds the usage chunk; other options are ignored."},
    {"tools", H, "Function tools, rendered by the chat template; `function.parameters` must be an object. `cache_control` is ignored; `function.strict` too: a forced call (`tool_choice` required or named) is always constrained to the parameters, with objects that declare properties and leave `additionalProperties` out closed, as vLLM's and SGLang's strict grammar does; other calls are parsed, not constrained."},
    {"tool_choice", H, "`auto`, `none`, `required` and a named function. `required`/named force the call: the gateway appends the opening of a tool call to the prompt (prompt tokens, loss mask 0) and the model samples the rest under constrained decoding (an offered tool, arguments its schema accepts). `required` without `tools` is a 400, as at OpenAI."},
    {"parallel_tool_calls", I, "Every tool call the model writes is returned."},
    {"n", H, "1 to 128 choices, generated one after another, each recorded as a call of its own (with `seed`, choice i samples with seed + i)."},
    {"store", I, "OpenAI's meaning (keep the output at OpenAI): nothing to keep here. Every call made with a session key is recorded for training whatever `store` says (pi-coding-agent sends `store: false`); AReaL's proxy instead drops such calls. To serve a call without recording it, use the admin key."},
    {"reasoning_effort", H, "Thinking switch of the chat template: `none`/`minimal` off, other values on."},
    {"response_format", H, "`json_object` and `json_schema` constrain decoding: the local engine masks every token that cannot continue valid JSON for the schema (recorded log-probs are those of the masked distribution); SGLang gets `json_schema`, vLLM `response_format`. The template's thinking is turned off for such a call (the reply starts with the JSON). `strict` is implied. Schema subset: see the structured-output notes below. `text` is the default; another type is a 400 (SGLang/vLLM's `structural_tag` is accepted, not enforced, and counted)."},
    {"frequency_penalty", H, "[-2, 2], OpenAI's semantics over the tokens generated so far; local engine, passed to SGLang/vLLM. Recorded log-probs include it."},
    {"presence_penalty", H, "[-2, 2], as `frequency_penalty`."},
    {"logit_bias", H, "Token id -> bias in [-100, 100] added to the logits; local engine, passed to SGLang/vLLM. Recorded log-probs include it."},
    {"metadata", I, "Stored by OpenAI for dashboards; nothing to do here."},
    {"user", I, "An end-user id for abuse monitoring."},
    {"safety_identifier", I, "An end-user id for abuse monitoring."},
    {"prompt_cache_key", I, "A cache hint; the backends cache prefixes on their own."},
    {"prompt_cache_retention", I, "A cache hint."},
    {"service_tier", I, "Billing tier."},
    {"verbosity", I, "A hint for OpenAI's own models."},
    {"modalities", I, "Text is the only output."},
    {"audio", I, "Text is the only output."},
    {"prediction", I, "A speculative-decoding hint; it never changes the output."},
    {"web_search_options", I, "No hosted web search."},
    {"functions", I, "Deprecated by OpenAI; send `tools`."},
    {"function_call", I, "Deprecated by OpenAI; send `tool_choice`."},
    {"top_k", H, "SGLang/vLLM extension: top-k sampling."},
    {"chat_template_kwargs", H, "SGLang/vLLM extension: variables for the chat template (e.g. `enable_thinking`), top level or inside `extra_body`."},
    {"extra_body", H, "Its `chat_template_kwargs` are read; the rest is ignored."},
    {"max_total_tokens", H, "AReaL extension: caps prompt + completion."},
    {"min_p", I, "SGLang/vLLM extension, not applied."},
    {"repetition_penalty", I, "SGLang/vLLM extension, not applied."},
    {"min_tokens", I, "SGLang/vLLM extension, not applied."},
    {"ignore_eos", I, "SGLang/vLLM extension, not applied: a turn ends at the end-of-turn token."},
    {"skip_special_tokens", I, "SGLang/vLLM extension; replies never contain the end-of-turn token."},
    {"spaces_between_special_tokens", I, "SGLang/vLLM extension."},
    {"include_stop_str_in_output", I, "SGLang/vLLM extension; the stop string is never returned."},
    {"stop_token_ids", I, "SGLang/vLLM extension; the tokenizer's end-of-turn and pad tokens stop."},
    {"add_generation_prompt", I, "vLLM extension; the assistant turn is always opened."},
    {"continue_final_message", I, "vLLM extension; a final assistant message is rendered as a closed turn."},
    {"echo", I, "vLLM extension."},
    {"priority", I, "vLLM extension; requests are served as they come."},
    {"request_id", I, "vLLM extension; the gateway assigns ids."},
    {"cache_salt", I, "vLLM extension."},
  }};
  return t;
}

const ApiTable& responses_fields() {
  static const ApiTable t{"responses", "OpenAI Responses (`/v1/responses`)", {
    {"input", H, "Required. A string or items: `message` (roles user, system, developer = system, assistant; `input_text`/`output_text`/`refusal` parts, joined with newlines), `reasoning` (summary and `reasoning_text` content become `reasoning_content`), `function_call`, `function_call_output`. Image, file and audio parts and other item types are dropped and counted; another part type is a 400. An echoed `output_text`'s `annotations` and `logprobs` are ignored."},
    {"model", H, "Echoed in the reply."},
    {"instructions", H, "The system message."},
    {"max_output_tokens", H, "Completion budget; capped by the context and `gateway.max_completion_tokens`."},
    {"temperature", H, "[0, 2]."},
    {"top_p", H, "Nucleus sampling; 0 keeps the most likely token only."},
    {"tools", H, "`function` tools are rendered (`parameters` must be an object; `strict` is ignored); hosted and other tool types (`web_search`, `file_search`, `namespace`, `mcp`, `custom`, ...) are dropped from the prompt and counted."},
    {"tool_choice", H, "`auto`, `none`, `required` and a named function (`{\"type\": \"function\", \"name\": ...}`), forced as in Chat Completions; `required` without `tools` is a 400."},
    {"parallel_tool_calls", I, "Every tool call the model writes is returned."},
    {"max_tool_calls", I, "Every tool call the model writes is returned."},
    {"reasoning", H, "`effort` is the template's thinking switch (`none`/`minimal` off); `summary` is ignored (the whole reasoning is returned as summary text)."},
    {"text", H, "`format`: `text` (default), `json_object` and `json_schema` (`schema` beside `type`) constrain decoding as Chat's `response_format` does; another type is a 400. `verbosity` is ignored."},
    {"store", H, "OpenAI's meaning: `false` keeps no response for `previous_response_id`. Every call is recorded for training either way (Codex CLI sends `store: false`)."},
    {"previous_response_id", H, "Continues a stored response of the same session: its conversation and exact token ids are the prefix (no re-tokenization). Unknown ids are a 404."},
    {"conversation", H, "The gateway keeps no Conversations objects: a conversation id is a 404; send the history in `input` or use `previous_response_id`."},
    {"prompt", H, "Stored prompt templates live at OpenAI: a prompt reference is a 404."},
    {"stream", H, "Server-sent events."},
    {"stream_options", I, "Obfuscation padding is never sent."},
    {"include", I, "Nothing extra to include: reasoning is returned as summary text, never encrypted (Codex CLI asks for `reasoning.encrypted_content`)."},
    {"top_logprobs", I, "Alternatives are not produced by the backends."},
    {"truncation", I, "`disabled` semantics: a prompt over the context is a 400."},
    {"background", I, "Answered synchronously: the reply is the completed response."},
    {"metadata", H, "Echoed in the response object."},
    {"user", I, "An end-user id for abuse monitoring."},
    {"safety_identifier", I, "An end-user id for abuse monitoring."},
    {"prompt_cache_key", I, "A cache hint; the backends cache prefixes on their own."},
    {"prompt_cache_retention", I, "A cache hint."},
    {"service_tier", I, "Billing tier."},
    {"client_metadata", I, "Sent by Codex CLI; nothing to do here."},
  }};
  return t;
}

const ApiTable& anthropic_messages_fields() {
  static const ApiTable t{"anthropic", "Anthropic Messages (`/v1/messages`)", {
    {"messages", H, "Required. Roles user and assistant, and `system` entries anywhere (Claude Code sends them), rendered in place as system messages (folded into the first where the chat template refuses them: \"What the chat template is given\"). Blocks `text`, `thinking` (assistant), `tool_use`, `tool_result`; `redacted_thinking`, `image`, `document`, `search_result`, `tool_reference`, `container_upload`, `compaction` and server-tool blocks (`server_tool_use`, `*_tool_result`, `mcp_*`) are dropped and counted; another block type is a 400. `cache_control`, `citations`, a thinking block's `signature` and a tool result's `is_error` are ignored. A final assistant message (a prefill) is rendered as a finished turn and the reply is a new turn, not its continuation."},
    {"model", H, "Echoed in the reply."},
    {"max_tokens", H, "Required completion budget; capped by the context and `gateway.max_completion_tokens`."},
    {"system", H, "A string or text blocks: the first system message. Claude Code's attribution line (a text starting `x-anthropic-billing-header:`, here and in `system` entries) is dropped and counted, as vLLM drops it: a hash of the conversation's first message in front of the system prompt would keep any prefix cache from sharing it."},
    {"stop_sequences", H, "Stop strings; `stop_reason` is `stop_sequence` and `stop_sequence` names the one hit."},
    {"temperature", H, "[0, 2] (Anthropic's range is [0, 1])."},
    {"top_p", H, "Nucleus sampling; 0 keeps the most likely token only."},
    {"top_k", H, "Top-k sampling."},
    {"stream", H, "Anthropic's server-sent events."},
    {"tools", H, "Client tools (`name`, `description`, `input_schema`, which must be an object) are rendered; `cache_control`, `defer_loading`, `strict`, `input_examples` are ignored; server tools (a `type` such as `web_search_20250305`) are dropped from the prompt and counted."},
    {"tool_choice", H, "`auto`, `none`, `any` (= required) and `tool` (named), forced as in Chat Completions (`any` and `tool` without `tools` are a 400); `disable_parallel_tool_use` is ignored."},
    {"thinking", H, "The template's thinking switch: `enabled` on, `disabled` off, `adaptive` follows `output_config.effort` (on unless `low`), else the template's default. `budget_tokens` and `display` are ignored."},
    {"output_config", H, "`effort` feeds adaptive thinking; `format` `{\"type\": \"json_schema\", \"schema\": ...}` constrains decoding as Chat's `response_format` does; another format type is a 400."},
    {"metadata", I, "`user_id` identifies the end user for abuse monitoring; nothing to do here."},
    {"context_management", I, "Server-side context editing (Claude Code sends `clear_thinking`): the conversation is used as sent."},
    {"service_tier", I, "Billing tier."},
    {"container", I, "Code-execution containers live at Anthropic."},
    {"mcp_servers", I, "No MCP connector: the agent's own MCP tools arrive as ordinary tools."},
    {"output_format", H, "The structured-output beta's spelling of `output_config.format`; enforced the same way."},
    {"inference_geo", I, "Data residency."},
  }};
  return t;
}

void FieldNotes::ignore(const std::string& field) {
  if (std::find(ignored.begin(), ignored.end(), field) == ignored.end()) ignored.push_back(field);
}

void FieldNotes::note_unknown(const std::string& field) {
  if (std::find(unknown.begin(), unknown.end(), field) == unknown.end()) unknown.push_back(field);
}

void note_nested_fields(const nlohmann::ordered_json& obj, const NestedFields& fields, FieldNotes& notes) {
  if (!obj.is_object()) return;
  auto listed = [](const std::vector<const char*>& names, const std::string& key) {
    return std::any_of(names.begin(), names.end(), [&](const char* n) { return key == n; });
  };
  for (const auto& item : obj.items()) {
    const std::string& key = item.key();
    if (item.value().is_null() || listed(fields.honoured, key)) continue;
    const std::string name = std::string(fields.path) + "." + key;
    if (listed(fields.ignored, key)) notes.ignore(name);
    else notes.note_unknown(name);
  }
}

void note_fields(const nlohmann::ordered_json& body, const ApiTable& table, FieldNotes& notes) {
  for (const auto& item : body.items()) {
    const std::string& key = item.key();  // not a structured binding: C++17 lambdas cannot capture those
    if (item.value().is_null()) continue;
    const auto it = std::find_if(table.fields.begin(), table.fields.end(), [&](const ApiField& f) { return key == f.name; });
    if (it == table.fields.end()) notes.unknown.push_back(key);
    else if (it->treatment == FieldTreatment::kIgnored) notes.ignore(key);
  }
}

std::string api_fields_markdown() {
  std::string out;
  for (const ApiTable* t : {&chat_completions_fields(), &responses_fields(), &anthropic_messages_fields()}) {
    out += "#### " + std::string(t->title) + "\n\n| field | | what the gateway does |\n|---|---|---|\n";
    for (const auto& f : t->fields)
      out += "| `" + std::string(f.name) + "` | " + (f.treatment == FieldTreatment::kHonoured ? "honoured" : "ignored") + " | " + f.note + " |\n";
    out += "\n";
  }
  return out;
}

}  // namespace areal::proxy
