#include "core/hf/tokenizer/added_vocabulary.hpp"

#include <algorithm>

#include "core/plugin_host/error.hpp"
#include "core/hf/tokenizer/unicode.hpp"
#include "core/hf/tokenizer/token_id.hpp"

namespace areal::tokenizer {
namespace {

// Rust's char::is_alphanumeric() || '_', as HF's single_word check uses.
bool is_word_char(char32_t c) { return unicode::is_letter(c) || unicode::is_number(c) || c == '_'; }

char32_t last_char(std::string_view s) {
  if (s.empty()) return 0;
  size_t i = s.size() - 1;
  while (i > 0 && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80 && s.size() - i < 4) --i;
  std::vector<char32_t> cps;
  std::vector<uint32_t> offs;
  unicode::decode_utf8(s.substr(i), cps, offs);
  return cps.empty() ? 0 : cps.back();
}

char32_t first_char(std::string_view s) {
  if (s.empty()) return 0;
  std::vector<char32_t> cps;
  std::vector<uint32_t> offs;
  unicode::decode_utf8(s.substr(0, std::min<size_t>(4, s.size())), cps, offs);
  return cps.empty() ? 0 : cps.front();
}

// Byte length of the run of white space ending at `end` (scanning left) or
// starting at `begin` (scanning right).
size_t space_before(std::string_view s, size_t end, size_t floor) {
  std::vector<char32_t> cps;
  std::vector<uint32_t> offs;
  unicode::decode_utf8(s.substr(floor, end - floor), cps, offs);
  size_t k = cps.size();
  while (k > 0 && unicode::is_white_space(cps[k - 1])) --k;
  return (end - floor) - offs[k];
}
size_t space_after(std::string_view s, size_t begin) {
  std::vector<char32_t> cps;
  std::vector<uint32_t> offs;
  unicode::decode_utf8(s.substr(begin), cps, offs);
  size_t k = 0;
  while (k < cps.size() && unicode::is_white_space(cps[k])) ++k;
  return offs[k];
}

}  // namespace

AddedVocabulary::AddedVocabulary(const nlohmann::json& added) {
  trie_.emplace_back();
  if (added.is_null()) return;
  for (const auto& t : added) {
    AddedToken a{token_id(t.at("id"), "an added token's id"), t.at("content").get<std::string>(), t.value("special", false),
                 t.value("lstrip", false), t.value("rstrip", false), t.value("single_word", false),
                 t.value("normalized", !t.value("special", false))};
    if (a.content.empty()) throw Error(AREAL_CODE_INVALID_ARGUMENT, "tokenizer.json: an added token has empty content");
    const size_t index = tokens_.size();
    first_byte_[static_cast<unsigned char>(a.content[0])] = true;
    by_id_[a.id] = index;
    by_content_[a.content] = index;
    uint32_t node = 0;
    for (unsigned char b : a.content) {
      auto it = trie_[node].next.find(b);
      if (it == trie_[node].next.end()) {
        trie_[node].next[b] = static_cast<uint32_t>(trie_.size());
        node = static_cast<uint32_t>(trie_.size());
        trie_.emplace_back();
      } else {
        node = it->second;
      }
    }
    trie_[node].token = static_cast<int32_t>(index);
    tokens_.push_back(std::move(a));
  }
}

const AddedToken* AddedVocabulary::by_id(int32_t id) const {
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &tokens_[it->second];
}

const AddedToken* AddedVocabulary::by_content(const std::string& c) const {
  auto it = by_content_.find(c);
  return it == by_content_.end() ? nullptr : &tokens_[it->second];
}

void AddedVocabulary::split(std::string_view text, bool normalized_phase, bool parse_special, std::vector<Segment>& out) const {
  if (tokens_.empty()) {
    if (!text.empty()) out.push_back({text, -1});
    return;
  }
  auto eligible = [&](const AddedToken& t) { return t.normalized == normalized_phase && (parse_special || !t.special); };
  size_t emitted = 0;  // text before this is already in `out`
  size_t pos = 0;
  while (pos < text.size()) {
    if (!first_byte_[static_cast<unsigned char>(text[pos])]) {
      ++pos;
      continue;
    }
    // Leftmost-longest: the longest eligible token starting at `pos`.
    int32_t best = -1;
    size_t best_len = 0;
    uint32_t node = 0;
    for (size_t k = pos; k < text.size(); ++k) {
      auto it = trie_[node].next.find(static_cast<unsigned char>(text[k]));
      if (it == trie_[node].next.end()) break;
      node = it->second;
      if (trie_[node].token >= 0 && eligible(tokens_[trie_[node].token])) best = trie_[node].token, best_len = k + 1 - pos;
    }
    if (best < 0) {
      ++pos;
      continue;
    }
    const AddedToken& t = tokens_[best];
    size_t start = pos, stop = pos + best_len;
    if (t.single_word) {
      const bool left_ok = start == 0 || !is_word_char(last_char(text.substr(0, start)));
      const bool right_ok = stop == text.size() || !is_word_char(first_char(text.substr(stop)));
      if (!left_ok || !right_ok) {
        pos = stop;  // the matcher moves past a discarded match, as HF's does
        continue;
      }
    }
    if (t.lstrip) start -= space_before(text, start, emitted);
    if (t.rstrip) stop += space_after(text, stop);
    if (start > emitted) out.push_back({text.substr(emitted, start - emitted), -1});
    out.push_back({text.substr(start, stop - start), t.id});
    emitted = pos = stop;
  }
  if (emitted < text.size()) out.push_back({text.substr(emitted), -1});
}

}  // namespace areal::tokenizer
