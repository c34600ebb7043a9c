#include "core/hf/tokenizer/bpe_model.hpp"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <queue>

#include "core/plugin_host/error.hpp"
#include "core/hf/tokenizer/unicode.hpp"
#include "core/hf/tokenizer/token_id.hpp"

namespace areal::tokenizer {

const std::array<char32_t, 256>& byte_to_char() {
  static const std::array<char32_t, 256> table = [] {
    std::array<char32_t, 256> t{};
    std::array<bool, 256> printable{};
    for (int b = '!'; b <= '~'; ++b) printable[b] = true;
    for (int b = 0xA1; b <= 0xAC; ++b) printable[b] = true;
    for (int b = 0xAE; b <= 0xFF; ++b) printable[b] = true;
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) t[b] = printable[b] ? static_cast<char32_t>(b) : next++;
    return t;
  }();
  return table;
}

bool byte_level_to_raw(const std::string& token, std::string& raw) {
  static const std::unordered_map<char32_t, unsigned char> inverse = [] {
    std::unordered_map<char32_t, unsigned char> m;
    for (int b = 0; b < 256; ++b) m[byte_to_char()[b]] = static_cast<unsigned char>(b);
    return m;
  }();
  std::vector<char32_t> cps;
  std::vector<uint32_t> offs;
  unicode::decode_utf8(token, cps, offs);
  raw.clear();
  for (char32_t c : cps) {
    auto it = inverse.find(c);
    if (it == inverse.end()) return false;
    raw.push_back(static_cast<char>(it->second));
  }
  return true;
}

namespace {

uint64_t pair_key(int32_t a, int32_t b) { return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b); }

}  // namespace

BpeModel::BpeModel(const nlohmann::json& spec, bool byte_level) : byte_level_(byte_level) {
  if (spec.value("type", "") != "BPE")
    throw Error(AREAL_CODE_UNSUPPORTED, "tokenizer.json: model type '" + spec.value("type", std::string("?")) +
                                            "' is not supported (BPE only)");
  if (!spec.contains("vocab") || !spec["vocab"].is_object()) throw Error(AREAL_CODE_INVALID_ARGUMENT, "tokenizer.json: model.vocab is missing");
  if (spec.contains("dropout") && !spec["dropout"].is_null() && spec["dropout"].get<double>() > 0)
    throw Error(AREAL_CODE_UNSUPPORTED, "tokenizer.json: BPE dropout is not supported (it makes encoding random)");
  auto str_or_empty = [&](const char* k) { return spec.contains(k) && spec[k].is_string() ? spec[k].get<std::string>() : std::string(); };
  ignore_merges_ = spec.value("ignore_merges", false);
  byte_fallback_ = spec.value("byte_fallback", false);
  continuing_subword_prefix_ = str_or_empty("continuing_subword_prefix");
  end_of_word_suffix_ = str_or_empty("end_of_word_suffix");
  if (!continuing_subword_prefix_.empty() || !end_of_word_suffix_.empty())
    throw Error(AREAL_CODE_UNSUPPORTED, "tokenizer.json: BPE continuing_subword_prefix / end_of_word_suffix are not supported");

  const auto& vocab = spec["vocab"];
  vocab_.reserve(vocab.size());
  for (const auto& [tok, id] : vocab.items()) {
    const int32_t i = token_id(id, "the id of token '" + tok + "'");
    vocab_[tok] = i;
    if (static_cast<size_t>(i) >= id_to_token_.size()) id_to_token_.resize(i + 1);
    id_to_token_[i] = tok;
  }
  const std::string unk = str_or_empty("unk_token");
  if (!unk.empty()) unk_id_ = id_of(unk);

  if (byte_level_) {
    byte_ids_.fill(-1);
    std::string raw;
    for (int b = 0; b < 256; ++b) {
      std::string ch;
      unicode::append_utf8(ch, byte_to_char()[b]);
      byte_ids_[b] = id_of(ch);
    }
    for (const auto& [tok, id] : vocab_)
      if (byte_level_to_raw(tok, raw)) raw_vocab_[raw] = id;
  }

  const auto& merges = spec.contains("merges") ? spec["merges"] : nlohmann::json::array();
  merges_.reserve(merges.size());
  int32_t rank = 0;
  for (const auto& m : merges) {
    std::string a, b;
    if (m.is_string()) {  // "a b"
      const std::string s = m.get<std::string>();
      const auto sp = s.find(' ', 1);
      if (sp == std::string::npos) throw Error(AREAL_CODE_INVALID_ARGUMENT, "tokenizer.json: bad merge '" + s + "'");
      a = s.substr(0, sp);
      b = s.substr(sp + 1);
    } else if (m.is_array() && m.size() == 2) {  // ["a", "b"]
      a = m[0].get<std::string>();
      b = m[1].get<std::string>();
    } else {
      throw Error(AREAL_CODE_INVALID_ARGUMENT, "tokenizer.json: bad merge entry " + m.dump());
    }
    const int32_t ia = id_of(a), ib = id_of(b), ic = id_of(a + b);
    if (ia < 0 || ib < 0 || ic < 0)
      throw Error(AREAL_CODE_INVALID_ARGUMENT, "tokenizer.json: merge '" + a + " " + b + "' uses tokens missing from the vocabulary");
    merges_.emplace(pair_key(ia, ib), Merge{rank++, ic});
  }
}

const std::string& BpeModel::token(int32_t id) const {
  static const std::string empty;
  return id >= 0 && static_cast<size_t>(id) < id_to_token_.size() ? id_to_token_[id] : empty;
}

int32_t BpeModel::id_of(const std::string& token) const {
  auto it = vocab_.find(token);
  return it == vocab_.end() ? -1 : it->second;
}

// Applies merges lowest rank first; among equal ranks the leftmost pair
// merges first (HF's order).
void BpeModel::merge(std::vector<int32_t>& sym) const {
  const size_t n = sym.size();
  if (n < 2) return;
  if (n <= 24) {  // short pieces: a linear scan per merge beats a heap
    while (sym.size() > 1) {
      int32_t best_rank = INT32_MAX, best_id = -1;
      size_t best_at = 0;
      for (size_t i = 0; i + 1 < sym.size(); ++i) {
        auto it = merges_.find(pair_key(sym[i], sym[i + 1]));
        if (it != merges_.end() && it->second.rank < best_rank) best_rank = it->second.rank, best_id = it->second.id, best_at = i;
      }
      if (best_id < 0) break;
      sym[best_at] = best_id;
      sym.erase(sym.begin() + static_cast<std::ptrdiff_t>(best_at) + 1);
    }
    return;
  }
  // Long pieces: linked list + heap of candidate merges.
  std::vector<int32_t> prev(n), next(n);
  std::vector<bool> alive(n, true);
  for (size_t i = 0; i < n; ++i) prev[i] = static_cast<int32_t>(i) - 1, next[i] = i + 1 < n ? static_cast<int32_t>(i) + 1 : -1;
  struct Cand {
    int32_t rank;
    int32_t left;
    int32_t left_id, right_id;
    bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : left > o.left; }
  };
  std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> heap;
  auto push = [&](int32_t l) {
    if (l < 0 || next[l] < 0) return;
    auto it = merges_.find(pair_key(sym[l], sym[next[l]]));
    if (it != merges_.end()) heap.push({it->second.rank, l, sym[l], sym[next[l]]});
  };
  for (size_t i = 0; i + 1 < n; ++i) push(static_cast<int32_t>(i));
  while (!heap.empty()) {
    Cand c = heap.top();
    heap.pop();
    const int32_t l = c.left;
    if (!alive[l] || next[l] < 0) continue;
    const int32_t r = next[l];
    if (sym[l] != c.left_id || sym[r] != c.right_id) continue;  // stale
    sym[l] = merges_.at(pair_key(c.left_id, c.right_id)).id;
    alive[r] = false;
    next[l] = next[r];
    if (next[r] >= 0) prev[next[r]] = l;
    push(prev[l]);
    push(l);
  }
  std::vector<int32_t> out;
  for (int32_t i = 0; i >= 0; i = next[i]) out.push_back(sym[i]);
  sym = std::move(out);
}

void BpeModel::encode_uncached(std::string_view piece, std::vector<int32_t>& out) const {
  if (byte_level_) {
    if (ignore_merges_) {
      auto it = raw_vocab_.find(std::string(piece));
      if (it != raw_vocab_.end()) {
        out.push_back(it->second);
        return;
      }
    }
    std::vector<int32_t> sym;
    sym.reserve(piece.size());
    for (unsigned char b : piece) {
      if (byte_ids_[b] < 0) {
        char hex[8];
        std::snprintf(hex, sizeof hex, "0x%02X", b);
        throw Error(AREAL_CODE_INVALID_ARGUMENT, std::string("tokenizer.json: byte-level vocabulary lacks byte ") + hex);
      }
      sym.push_back(byte_ids_[b]);
    }
    merge(sym);
    out.insert(out.end(), sym.begin(), sym.end());
    return;
  }
  if (ignore_merges_) {
    if (int32_t id = id_of(std::string(piece)); id >= 0) {
      out.push_back(id);
      return;
    }
  }
  std::vector<char32_t> cps;
  std::vector<uint32_t> offs;
  unicode::decode_utf8(piece, cps, offs);
  std::vector<int32_t> sym;
  for (size_t i = 0; i < cps.size(); ++i) {
    const std::string ch(piece.substr(offs[i], offs[i + 1] - offs[i]));
    const int32_t id = id_of(ch);
    if (id >= 0) {
      sym.push_back(id);
    } else if (byte_fallback_) {
      for (unsigned char b : ch) {
        char name[8];
        std::snprintf(name, sizeof name, "<0x%02X>", b);
        const int32_t bid = id_of(name);
        if (bid < 0) throw Error(AREAL_CODE_INVALID_ARGUMENT, std::string("tokenizer.json: byte_fallback token ") + name + " is missing");
        sym.push_back(bid);
      }
    } else if (unk_id_ >= 0) {
      sym.push_back(unk_id_);  // HF's fuse_unk=false: one unk per unknown character
    } else {
      throw Error(AREAL_CODE_INVALID_ARGUMENT, "tokenizer.json: character '" + ch + "' is not in the vocabulary and there is no unk_token");
    }
  }
  merge(sym);
  out.insert(out.end(), sym.begin(), sym.end());
}

void BpeModel::encode(std::string_view piece, std::vector<int32_t>& out) const {
  if (piece.empty()) return;
  if (piece.size() == 1 && byte_level_ && byte_ids_[static_cast<unsigned char>(piece[0])] >= 0) {
    out.push_back(byte_ids_[static_cast<unsigned char>(piece[0])]);
    return;
  }
  Shard& shard = cache_[std::hash<std::string_view>{}(piece) % kShards];
  thread_local std::string key;  // reused: lookups allocate nothing
  key.assign(piece.data(), piece.size());
  {
    std::lock_guard<std::mutex> lock(shard.mutex);
    auto it = shard.map.find(key);
    if (it != shard.map.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  const size_t before = out.size();
  encode_uncached(piece, out);
  if (piece.size() > 256) return;  // long pieces are rarely repeated: keep the cache for words
  std::lock_guard<std::mutex> lock(shard.mutex);
  if (shard.map.size() >= kShardCapacity) shard.map.clear();
  shard.map.emplace(key, std::vector<int32_t>(out.begin() + static_cast<std::ptrdiff_t>(before), out.end()));
}

}  // namespace areal::tokenizer
