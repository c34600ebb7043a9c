// The examples of `areal-host sft`: chat conversations (JSONL, one
// {"messages": [...]} per line) turned into token rows exactly as the
// gateway would record the last reply: the conversation before it through
// the chat template with the generation prompt, then the reply's text
// tokens and the end-of-turn token (tokenizer_config's eos_token). A reply
// with tool calls or reasoning is the template's rendering of it, as the
// model samples it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/hf/chat_template/chat_template.hpp"
#include "core/hf/tokenizer/tokenizer.hpp"
#include "core/trainer/sft_loop.hpp"

namespace areal::host {

// One line's conversation as an example. Throws areal::Error
// (INVALID_ARGUMENT) naming what is wrong: no messages, a last message that
// is not an assistant's with string content, or a tokenizer without eos_token.
trainer::SftExample sft_example(const nlohmann::ordered_json& line, const tokenizer::Tokenizer& tok,
                                const jinja::ChatTemplate& chat, const nlohmann::ordered_json& template_kwargs);

// Every line of a JSONL file; errors name the file and line. Examples
// longer than `max_length` tokens (0: no limit) are left out and counted in
// *dropped (AReaL filters them; one would otherwise fail a step hours in).
std::vector<trainer::SftExample> read_sft_dataset(const std::string& path, const tokenizer::Tokenizer& tok,
                                                  const jinja::ChatTemplate& chat, const nlohmann::ordered_json& template_kwargs,
                                                  size_t max_length = 0, size_t* dropped = nullptr);

}  // namespace areal::host
