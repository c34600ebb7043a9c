// Compares areal's tokenizer with Hugging Face's (reference.js output):
// every id with and without special tokens, both decodes, incremental
// decoding, and the byte round-trip of invalid UTF-8 input.
//
//   areal_tokenizer_parity REFERENCE.jsonl
#include <fstream>
#include <iostream>
#include <map>
#include <cstdint>
#include <string>
#include <vector>
#include <memory>

#include <nlohmann/json.hpp>

#include "core/hf/tokenizer/tokenizer.hpp"
#include "core/hf/tokenizer/unicode.hpp"

using areal::tokenizer::Tokenizer;
using nlohmann::json;

namespace {

std::string from_hex(std::string hex) {
  std::string out, digits;
  for (char c : hex)
    if (!std::isspace(static_cast<unsigned char>(c))) digits.push_back(c);
  for (size_t i = 0; i + 1 < digits.size(); i += 2) out.push_back(static_cast<char>(std::stoi(digits.substr(i, 2), nullptr, 16)));
  return out;
}

std::string show(const std::vector<int32_t>& ids) {
  std::string s;
  for (size_t i = 0; i < ids.size() && i < 40; ++i) s += (i ? "," : "") + std::to_string(ids[i]);
  return "[" + s + (ids.size() > 40 ? ",..." : "") + "] (" + std::to_string(ids.size()) + ")";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: areal_tokenizer_parity REFERENCE.jsonl\n";
    return 2;
  }
  std::ifstream in(argv[1]);
  if (!in) {
    std::cerr << "cannot read " << argv[1] << "\n";
    return 2;
  }
  std::map<std::string, std::shared_ptr<const Tokenizer>> tokenizers;
  std::map<std::string, size_t> strings_per_family;
  size_t checks = 0, mismatches = 0;
  auto fail = [&](const json& r, const std::string& what, const std::string& detail) {
    if (++mismatches <= 20)
      std::cerr << "MISMATCH " << r["family"].get<std::string>() << "/" << r["name"].get<std::string>() << " " << what << ": " << detail << "\n";
  };
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const json r = json::parse(line);
    const std::string family = r["family"];
    auto& tok = tokenizers[family];
    if (!tok) tok = Tokenizer::from_dir(r["dir"].get<std::string>());
    ++strings_per_family[family];
    const bool invalid = r.contains("hex") && !r["hex"].is_null();
    const std::string raw = invalid ? from_hex(r["hex"]) : r["text"].get<std::string>();
    const std::string text = invalid ? areal::unicode::utf8_lossy(raw) : raw;

    const auto ids = tok->encode(text, true);
    const auto ids_plain = tok->encode(text, false);
    const auto want = r["ids"].get<std::vector<int32_t>>(), want_plain = r["ids_no_special"].get<std::vector<int32_t>>();
    ++checks;
    if (ids != want) fail(r, "ids", "got " + show(ids) + " want " + show(want));
    ++checks;
    if (ids_plain != want_plain) fail(r, "ids (no special tokens)", "got " + show(ids_plain) + " want " + show(want_plain));
    ++checks;
    if (tok->decode(want, false) != r["decoded"].get<std::string>()) fail(r, "decode", json(tok->decode(want, false)).dump());
    ++checks;
    if (tok->decode(want, true) != r["decoded_skip_special"].get<std::string>()) fail(r, "decode skip_special", json(tok->decode(want, true)).dump());
    // Streaming: the chunks concatenate to the full decode, each chunk valid UTF-8.
    for (bool skip : {false, true}) {
      areal::tokenizer::IncrementalDecoder inc(tok, skip);
      std::string streamed;
      bool valid = true;
      for (int32_t id : want) {
        const std::string chunk = inc.push(id);
        valid = valid && areal::unicode::is_valid_utf8(chunk);
        streamed += chunk;
      }
      streamed += inc.finish();
      ++checks;
      if (!valid || streamed != tok->decode(want, skip)) fail(r, std::string("incremental decode") + (skip ? " skip_special" : ""), json(streamed).dump());
    }
    if (invalid) {  // raw bytes encode and come back exactly
      ++checks;
      if (tok->decode_bytes(tok->encode(raw, false)) != raw) fail(r, "byte round-trip", "raw bytes did not survive encode/decode_bytes");
    }
  }
  size_t strings = 0;
  for (const auto& [f, n] : strings_per_family) strings += n;
  std::cout << "tokenizer parity: " << strings << " strings over " << strings_per_family.size() << " tokenizer families ("
            << checks << " checks), " << mismatches << " mismatches\n";
  return mismatches == 0 ? 0 : 1;
}
