// `areal-host tokenize --tokenizer DIR`: text on stdin -> {"ids": [...]}.
// `--decode`: {"ids": [...]} (or a bare array) on stdin -> {"text": "..."}.
// `--chat FILE.json`: an OpenAI-style request -> {"ids": [...], "prompt": "..."}.
#include <fstream>
#include <iostream>
#include <iterator>
#include <set>
#include <cstdint>
#include <string>
#include <vector>
#include <memory>
#include <exception>

#include <nlohmann/json.hpp>

#include "core/plugin_host/error.hpp"
#include "core/hf/chat_template/chat_template.hpp"
#include "core/hf/tokenizer/tokenizer.hpp"
#include "commands.hpp"

namespace areal::host {

int tokenize(const CommandLine& cl) {
  static const std::set<std::string> kFlags = {"tokenizer", "decode", "chat", "no-special-tokens", "no-parse-special",
                                               "skip-special-tokens"};
  for (const auto& [flag, _] : cl.flags)
    if (!kFlags.count(flag)) {
      std::cerr << "areal-host tokenize: unknown flag --" << flag
                << " (flags: --tokenizer DIR, --chat FILE.json, --decode, --no-special-tokens, --no-parse-special, --skip-special-tokens)\n";
      return 2;
    }
  if (!cl.flags.count("tokenizer")) {
    std::cerr << "areal-host tokenize: --tokenizer DIR is required (a folder with tokenizer.json)\n";
    return 2;
  }
  std::shared_ptr<const tokenizer::Tokenizer> tok;
  try {
    tok = tokenizer::Tokenizer::from_dir(cl.flags.at("tokenizer"));
  } catch (const std::exception& e) {
    std::cerr << "areal-host tokenize: " << e.what() << "\n";
    return 2;
  }
  try {
    if (cl.flags.count("chat")) {
      // An OpenAI-style request: {"messages": [...], "tools": [...], "add_generation_prompt": true,
      // "chat_template_kwargs": {...}} -> the rendered prompt and its ids (no extra special tokens,
      // as transformers' apply_chat_template(tokenize=True)).
      std::ifstream in(cl.flags.at("chat"));
      if (!in) throw Error(AREAL_CODE_NOT_FOUND, "cannot read " + cl.flags.at("chat"));
      const auto req = nlohmann::ordered_json::parse(in);
      const auto chat = jinja::ChatTemplate::from_tokenizer_config(tok->config());
      const std::string prompt = chat.render(req.at("messages"), req.value("tools", nlohmann::ordered_json()),
                                             req.value("add_generation_prompt", true),
                                             req.value("chat_template_kwargs", nlohmann::ordered_json::object()));
      std::cout << nlohmann::ordered_json{{"ids", tok->encode(prompt, false)}, {"prompt", prompt}}.dump() << "\n";
      return 0;
    }
  } catch (const nlohmann::json::exception& e) {
    std::cerr << "areal-host tokenize --chat: the file must hold {\"messages\": [...]}: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "areal-host tokenize: " << e.what() << "\n";
    return 2;
  }
  const std::string input((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
  try {
    if (cl.flags.count("decode")) {
      nlohmann::json j = nlohmann::json::parse(input);
      const nlohmann::json& ids = j.is_object() ? j.at("ids") : j;
      const std::string text = tok->decode(ids.get<std::vector<int32_t>>(), cl.flags.count("skip-special-tokens") > 0);
      std::cout << nlohmann::json{{"text", text}}.dump() << "\n";
      return 0;
    }
    const auto ids = tok->encode(input, !cl.flags.count("no-special-tokens"), !cl.flags.count("no-parse-special"));
    std::cout << nlohmann::json{{"ids", ids}}.dump() << "\n";
    return 0;
  } catch (const nlohmann::json::exception& e) {
    std::cerr << "areal-host tokenize --decode: stdin must be {\"ids\": [...]} or [...]: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "areal-host tokenize: " << e.what() << "\n";
    return 2;
  }
}

}  // namespace areal::host
