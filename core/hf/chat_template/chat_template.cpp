#include "core/hf/chat_template/chat_template.hpp"

#include "core/plugin_host/error.hpp"

namespace areal::jinja {

ChatTemplate::ChatTemplate(std::string source, nlohmann::ordered_json special_tokens)
    : source_(std::move(source)), template_(std::make_shared<Template>(source_)), special_tokens_(std::move(special_tokens)) {}

ChatTemplate ChatTemplate::from_tokenizer_config(const nlohmann::json& config, const std::string& name) {
  if (!config.is_object() || !config.contains("chat_template"))
    throw Error(AREAL_CODE_NOT_FOUND, "tokenizer_config.json has no chat_template");
  const auto& t = config["chat_template"];
  std::string source;
  if (t.is_string()) {
    if (!name.empty() && name != "default") throw Error(AREAL_CODE_NOT_FOUND, "there is only one chat template, not '" + name + "'");
    source = t.get<std::string>();
  } else if (t.is_array()) {  // [{"name": ..., "template": ...}, ...]
    const std::string want = name.empty() ? "default" : name;
    std::string names;
    for (const auto& entry : t) {
      names += (names.empty() ? "" : ", ") + entry.value("name", std::string("?"));
      if (entry.value("name", "") == want) source = entry.value("template", "");
    }
    if (source.empty()) throw Error(AREAL_CODE_NOT_FOUND, "no chat template named '" + want + "' (have: " + names + ")");
  } else {
    throw Error(AREAL_CODE_INVALID_ARGUMENT, "chat_template must be a string or a list of named templates");
  }
  nlohmann::ordered_json specials = nlohmann::ordered_json::object();
  for (const char* key : {"bos_token", "eos_token", "pad_token", "unk_token"}) {
    if (!config.contains(key) || config[key].is_null()) continue;
    const auto& v = config[key];
    if (v.is_string()) specials[key] = v.get<std::string>();
    else if (v.is_object() && v.contains("content")) specials[key] = v["content"].get<std::string>();  // AddedToken dict
  }
  try {
    return ChatTemplate(std::move(source), std::move(specials));
  } catch (const Error& e) {
    throw Error(e.code(), std::string("chat_template: ") + e.what());
  }
}

std::string ChatTemplate::render(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                                 bool add_generation_prompt, const nlohmann::ordered_json& extra_kwargs) const {
  if (!messages.is_array()) throw Error(AREAL_CODE_INVALID_ARGUMENT, "messages must be an array");
  Object globals;
  for (const auto& [k, v] : special_tokens_.items()) globals.set(k, Value::from_json(v));
  if (extra_kwargs.is_object())
    for (const auto& [k, v] : extra_kwargs.items()) globals.set(k, Value::from_json(v));
  globals.set("messages", Value::from_json(messages));
  globals.set("tools", tools.is_null() ? Value::none() : Value::from_json(tools));
  globals.set("add_generation_prompt", Value(add_generation_prompt));
  return template_->render(globals);
}

}  // namespace areal::jinja
