// Compares areal's Jinja engine with a reference's renders: the real chat
// templates byte for byte, plus engine snippets. Two references, sharing no
// code with ours or each other:
//   - @huggingface/jinja (reference_templates.js), with the token ids of each
//     rendered prompt from HF's tokenizer. Where it departs from Python
//     Jinja2, the snippet carries `python_expected` and we must match Python;
//   - Python Jinja2 itself (reference_templates_jinja2.py, "reference":
//     "jinja2"), as transformers, SGLang and vLLM run it: its renders are
//     what we must match, with no token ids.
//
//   areal_template_parity REFERENCE.jsonl
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <cstdint>
#include <string>
#include <vector>
#include <memory>
#include <exception>

#include <nlohmann/json.hpp>

#include "core/hf/chat_template/chat_template.hpp"
#include "core/hf/tokenizer/tokenizer.hpp"

using nlohmann::ordered_json;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: areal_template_parity REFERENCE.jsonl\n";
    return 2;
  }
  std::ifstream in(argv[1]);
  if (!in) {
    std::cerr << "cannot read " << argv[1] << "\n";
    return 2;
  }
  std::map<std::string, std::shared_ptr<const areal::tokenizer::Tokenizer>> tokenizers;
  std::map<std::string, std::unique_ptr<areal::jinja::ChatTemplate>> templates;
  std::set<std::string> conversations;
  size_t renders = 0, snippets = 0, divergences = 0, mismatches = 0, id_checks = 0;
  auto fail = [&](const std::string& what, const std::string& detail) {
    if (++mismatches <= 20) std::cerr << "MISMATCH " << what << ": " << detail << "\n";
  };
  std::string line, reference = "@huggingface/jinja";
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const ordered_json r = ordered_json::parse(line);
    const std::string name = r["name"];
    if (r.value("reference", "") == "jinja2") reference = "Python Jinja2";
    if (r.value("reference", "") == "transformers") reference = "HF transformers' apply_chat_template (ids: Python tokenizers)";
    if (r["kind"] == "snippet") {
      ++snippets;
      const bool python = r.contains("python_expected");
      divergences += python;
      const ordered_json want = python ? r["python_expected"] : r["rendered"];
      std::string got, error;
      try {
        areal::jinja::Object ctx;
        for (const auto& [k, v] : r["context"].items()) ctx.set(k, areal::jinja::Value::from_json(v));
        got = areal::jinja::Template(r["template"].get<std::string>()).render(ctx);
      } catch (const std::exception& e) {
        error = e.what();
      }
      if (want.is_null()) {
        if (error.empty()) fail("snippet " + name, "reference failed (" + r["error"].dump() + ") but areal rendered " + ordered_json(got).dump());
      } else if (!error.empty() || got != want.get<std::string>()) {
        fail("snippet " + name, "got " + (error.empty() ? ordered_json(got).dump() : "error: " + error) + " want " + want.dump());
      }
      continue;
    }
    const std::string family = r["family"];
    const std::string key = family + "/" + name + " gen=" + r["add_generation_prompt"].dump() + " kwargs=" + r["kwargs"].dump();
    auto& tok = tokenizers[family];
    if (!tok) tok = areal::tokenizer::Tokenizer::from_dir(r["dir"].get<std::string>());
    auto& tmpl = templates[family];
    if (!tmpl) tmpl = std::make_unique<areal::jinja::ChatTemplate>(areal::jinja::ChatTemplate::from_tokenizer_config(tok->config()));
    conversations.insert(name);
    ++renders;
    std::string got, error;
    try {
      got = tmpl->render(r["messages"], r["tools"], r["add_generation_prompt"].get<bool>(), r["kwargs"]);
    } catch (const std::exception& e) {
      error = e.what();
    }
    if (r["rendered"].is_null()) {
      if (error.empty()) fail(key, "reference failed (" + r["error"].dump() + ") but areal rendered");
      continue;
    }
    if (!error.empty()) {
      fail(key, "areal failed: " + error);
      continue;
    }
    if (got != r["rendered"].get<std::string>()) {
      fail(key, "rendered " + ordered_json(got).dump() + "\n   want " + r["rendered"].dump());
      continue;
    }
    if (r["ids"].is_null()) continue;  // the Jinja2 reference renders text only
    ++id_checks;
    if (tok->encode(got, false) != r["ids"].get<std::vector<int32_t>>()) fail(key, "token ids of the rendered prompt differ");
  }
  std::cout << "template parity against " << reference << ": " << templates.size() << " chat templates x " << conversations.size() << " conversations = "
            << renders << " renders (" << id_checks << " prompts tokenized), " << snippets << " engine snippets ("
            << divergences << " documented @huggingface/jinja divergences held to Python's answer), " << mismatches
            << " mismatches\n";
  return mismatches == 0 ? 0 : 1;
}
