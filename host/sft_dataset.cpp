#include "sft_dataset.hpp"

#include <fstream>
#include <cstdint>
#include <exception>

#include "core/plugin_host/error.hpp"

namespace areal::host {

using J = nlohmann::ordered_json;

namespace {

int32_t eos_id(const tokenizer::Tokenizer& tok) {
  const auto& c = tok.config();
  if (c.is_object() && c.contains("eos_token") && !c["eos_token"].is_null()) {
    const auto& v = c["eos_token"];
    const std::string text = v.is_string() ? v.get<std::string>() : v.value("content", std::string());
    if (!text.empty()) return tok.token_to_id(text);
  }
  return -1;
}

}  // namespace

trainer::SftExample sft_example(const J& line, const tokenizer::Tokenizer& tok, const jinja::ChatTemplate& chat, const J& kwargs) {
  if (!line.is_object() || !line.contains("messages") || !line["messages"].is_array() || line["messages"].size() < 2)
    throw Error(AREAL_CODE_INVALID_ARGUMENT, "needs {\"messages\": [...]} with at least a prompt message and the reply");
  const J& messages = line["messages"];
  const J& reply = messages.back();
  const bool calls = reply.is_object() && reply.contains("tool_calls") && reply["tool_calls"].is_array() && !reply["tool_calls"].empty();
  const bool text = reply.is_object() && reply.contains("content") && reply["content"].is_string();
  const bool no_text = reply.is_object() && (!reply.contains("content") || reply["content"].is_null());
  if (!reply.is_object() || reply.value("role", "") != "assistant" || !(text || (calls && no_text)))
    throw Error(AREAL_CODE_INVALID_ARGUMENT, "the last message must be {\"role\": \"assistant\", \"content\": \"...\"} (content may be null "
                                             "beside tool_calls): it is the reply trained on");
  const int32_t eos = eos_id(tok);
  if (eos < 0) throw Error(AREAL_CODE_INVALID_ARGUMENT, "tokenizer_config.json names no eos_token: a reply's end cannot be trained");
  J prompt_messages = J::array();
  for (size_t i = 0; i + 1 < messages.size(); ++i) prompt_messages.push_back(messages[i]);
  const J tools = line.value("tools", J());
  const std::string prompt = chat.render(prompt_messages, tools, true, kwargs);
  trainer::SftExample e;
  e.input_ids = tok.encode(prompt, false);
  e.prompt_tokens = e.input_ids.size();
  const bool reasoning = reply.contains("reasoning_content") && reply["reasoning_content"].is_string() && !reply["reasoning_content"].get<std::string>().empty();
  std::string sampled;
  if (!calls && !reasoning) {
    sampled = reply["content"].get<std::string>();
  } else {
    // Tool calls and reasoning are text the model samples in the template's
    // own syntax (<tool_call>{...}</tool_call>, <think>...</think>): the
    // reply is what the template renders after the prompt, up to its end of
    // turn, as TRL takes a completion from the rendered conversation.
    const std::string whole = chat.render(messages, tools, false, kwargs);
    const std::string& eos_text = tok.id_to_token(eos);
    const size_t end = whole.size() >= prompt.size() ? whole.find(eos_text, prompt.size()) : std::string::npos;
    if (whole.compare(0, prompt.size(), prompt) != 0 || end == std::string::npos)
      throw Error(AREAL_CODE_INVALID_ARGUMENT, "the chat template does not render the reply's tool_calls/reasoning_content after the prompt "
                                               "it renders for generation, ending with " + eos_text + ": this template cannot train them");
    sampled = whole.substr(prompt.size(), end - prompt.size());
    if (reasoning && sampled.find(reply["reasoning_content"].get<std::string>()) == std::string::npos)
      throw Error(AREAL_CODE_INVALID_ARGUMENT, "the chat template does not render the reply's reasoning_content: training the reply without "
                                               "it would teach the model to skip its reasoning (drop the field to train the answer alone)");
  }
  // The reply as sampled text: special-token text in it stays text, as a model's sampled bytes would.
  for (int32_t id : tok.encode(sampled, false, false)) e.input_ids.push_back(id);
  e.input_ids.push_back(eos);
  return e;
}

std::vector<trainer::SftExample> read_sft_dataset(const std::string& path, const tokenizer::Tokenizer& tok,
                                                  const jinja::ChatTemplate& chat, const J& kwargs, size_t max_length, size_t* dropped) {
  size_t too_long = 0;
  std::ifstream in(path);
  if (!in) throw Error(AREAL_CODE_NOT_FOUND, "cannot read sft dataset '" + path + "'");
  std::vector<trainer::SftExample> out;
  std::string text;
  for (size_t n = 1; std::getline(in, text); ++n) {
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = path + ":" + std::to_string(n) + ": ";
    J line;
    try {
      line = J::parse(text);
    } catch (const std::exception& e) {
      throw Error(AREAL_CODE_INVALID_ARGUMENT, where + "not valid JSON: " + e.what());
    }
    try {
      trainer::SftExample e = sft_example(line, tok, chat, kwargs);
      if (max_length > 0 && e.input_ids.size() > max_length) ++too_long;
      else out.push_back(std::move(e));
    } catch (const Error& e) {
      throw Error(e.code(), where + e.what());
    } catch (const std::exception& e) {
      throw Error(AREAL_CODE_INVALID_ARGUMENT, where + e.what());
    }
  }
  if (dropped) *dropped = too_long;
  if (out.empty() && too_long > 0)
    throw Error(AREAL_CODE_INVALID_ARGUMENT, "every example of sft dataset '" + path + "' is longer than sft.max_length (" + std::to_string(max_length) + " tokens)");
  if (out.empty()) throw Error(AREAL_CODE_INVALID_ARGUMENT, "sft dataset '" + path + "' has no examples");
  return out;
}

}  // namespace areal::host
