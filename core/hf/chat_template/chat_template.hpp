// A model's chat template, rendered with the context transformers'
// apply_chat_template builds: messages, tools (None when absent),
// add_generation_prompt, the special tokens of tokenizer_config.json
// (bos_token, eos_token, pad_token, unk_token) and any extra kwargs such as
// enable_thinking.
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "core/hf/chat_template/jinja.hpp"

namespace areal::jinja {

class ChatTemplate {
 public:
  // From tokenizer_config.json. `name` picks one of several named templates
  // ("default" when empty). Throws areal::Error when there is none or it
  // does not parse (line and column included).
  static ChatTemplate from_tokenizer_config(const nlohmann::json& config, const std::string& name = "");
  ChatTemplate(std::string source, nlohmann::ordered_json special_tokens);

  // messages: OpenAI-style array; tools: array or null. Throws areal::Error
  // (INVALID_ARGUMENT) for a request the template rejects.
  std::string render(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools, bool add_generation_prompt,
                     const nlohmann::ordered_json& extra_kwargs = nlohmann::ordered_json::object()) const;

  const std::string& source() const { return source_; }

 private:
  std::string source_;
  std::shared_ptr<const Template> template_;
  nlohmann::ordered_json special_tokens_;
};

}  // namespace areal::jinja
