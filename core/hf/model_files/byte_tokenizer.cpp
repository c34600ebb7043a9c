#include "core/hf/model_files/byte_tokenizer.hpp"

#include <filesystem>
#include <fstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/plugin_host/error.hpp"

namespace areal::model {

namespace {

using nlohmann::ordered_json;

// GPT-2's byte -> printable character map, which the ByteLevel
// pre-tokenizer and decoder assume: printable Latin-1 bytes stand for
// themselves, the rest are shifted to U+0100 upwards in byte order.
std::vector<std::string> byte_symbols() {
  std::vector<std::string> out(256);
  int shifted = 0;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    const int cp = printable ? b : 256 + shifted++;
    std::string s;
    if (cp < 0x80) s += static_cast<char>(cp);
    else s += static_cast<char>(0xC0 | (cp >> 6)), s += static_cast<char>(0x80 | (cp & 0x3F));
    out[b] = s;
  }
  return out;
}

const char* const kSpecials[] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>",
                                 "<tool_call>",   "</tool_call>", "<tool_response>", "</tool_response>"};

// ChatML with tools in the system turn and tool results as user turns,
// the layout Qwen models use (so the qwen tool-call parser applies).
const char* const kChatTemplate =
    "{%- macro text(content) -%}"
    "{%- if content is string -%}{{ content }}"
    "{%- elif content -%}{%- for part in content -%}{%- if part.type == 'text' -%}{{ part.text }}{%- endif -%}{%- endfor -%}"
    "{%- endif -%}"
    "{%- endmacro -%}"
    "{%- if tools -%}"
    "{{ '<|im_start|>system\\n' }}"
    "{%- if messages[0].role == 'system' -%}{{ text(messages[0].content) + '\\n\\n' }}{%- endif -%}"
    "{{ 'Tools you may call:\\n<tools>\\n' }}"
    "{%- for tool in tools -%}{{ tool | tojson }}{{ '\\n' }}{%- endfor -%}"
    "{{ '</tools>\\nTo call one, reply with <tool_call>{\"name\": NAME, \"arguments\": {...}}</tool_call>.<|im_end|>\\n' }}"
    "{%- elif messages and messages[0].role == 'system' -%}"
    "{{ '<|im_start|>system\\n' + text(messages[0].content) + '<|im_end|>\\n' }}"
    "{%- endif -%}"
    "{%- for message in messages -%}"
    "{%- if message.role == 'assistant' -%}"
    "{{ '<|im_start|>assistant\\n' + text(message.content) }}"
    "{%- for call in message.tool_calls or [] -%}"
    "{%- set f = call.function if call.function else call -%}"
    "{{ '<tool_call>{\"name\": ' + (f.name | tojson) + ', \"arguments\": ' }}"
    "{%- if f.arguments is string -%}{{ f.arguments }}{%- else -%}{{ f.arguments | tojson }}{%- endif -%}"
    "{{ '}</tool_call>' }}"
    "{%- endfor -%}"
    "{{ '<|im_end|>\\n' }}"
    "{%- elif message.role == 'tool' -%}"
    "{{ '<|im_start|>user\\n<tool_response>' + text(message.content) + '</tool_response><|im_end|>\\n' }}"
    "{%- elif message.role != 'system' or not loop.first -%}"
    "{{ '<|im_start|>' + message.role + '\\n' + text(message.content) + '<|im_end|>\\n' }}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<|im_start|>assistant\\n' }}{%- endif -%}";

void write(const std::filesystem::path& p, const ordered_json& j) {
  std::ofstream out(p);
  if (!out) throw Error(AREAL_CODE_UNAVAILABLE, p.string() + ": cannot write");
  out << j.dump(2) << "\n";
}

}  // namespace

void write_byte_tokenizer(const std::string& dir) {
  namespace fs = std::filesystem;
  fs::create_directories(dir);
  const auto symbols = byte_symbols();
  ordered_json vocab = ordered_json::object();
  for (int b = 0; b < 256; ++b) vocab[symbols[b]] = b;

  ordered_json added = ordered_json::array();
  ordered_json decoder = ordered_json::object();
  int id = 256;
  auto add = [&](const std::string& content) {
    added.push_back({{"id", id}, {"content", content}, {"single_word", false}, {"lstrip", false}, {"rstrip", false},
                     {"normalized", false}, {"special", true}});
    decoder[std::to_string(id)] = {{"content", content}, {"lstrip", false}, {"normalized", false}, {"rstrip", false},
                                   {"single_word", false}, {"special", true}};
    ++id;
  };
  for (const char* s : kSpecials) add(s);
  for (int r = 0; id < kByteTokenizerVocab; ++r) add("<|reserved_" + std::to_string(r) + "|>");

  const ordered_json byte_level = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}};
  ordered_json tokenizer = {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", added},
      {"normalizer", {{"type", "NFC"}}},
      {"pre_tokenizer", byte_level},
      {"post_processor", byte_level},
      {"decoder", byte_level},
      {"model",
       {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"continuing_subword_prefix", ""},
        {"end_of_word_suffix", ""}, {"fuse_unk", false}, {"byte_fallback", false}, {"ignore_merges", false},
        {"vocab", vocab}, {"merges", ordered_json::array()}}}};
  write(fs::path(dir) / "tokenizer.json", tokenizer);

  const ordered_json config = {{"add_bos_token", false},
                               {"add_prefix_space", false},
                               {"added_tokens_decoder", decoder},
                               {"bos_token", nullptr},
                               {"chat_template", kChatTemplate},
                               {"clean_up_tokenization_spaces", false},
                               {"eos_token", "<|im_end|>"},
                               {"model_max_length", 4096},
                               {"pad_token", "<|endoftext|>"},
                               {"split_special_tokens", false},
                               {"tokenizer_class", "PreTrainedTokenizerFast"},
                               {"unk_token", nullptr}};
  write(fs::path(dir) / "tokenizer_config.json", config);
}

}  // namespace areal::model
