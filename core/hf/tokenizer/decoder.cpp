#include "core/hf/tokenizer/decoder.hpp"

#include <cstdio>
#include <unordered_map>
#include <cstdint>

#include "core/plugin_host/error.hpp"
#include "core/hf/tokenizer/bpe_model.hpp"
#include "core/hf/tokenizer/unicode.hpp"

namespace areal::tokenizer {

std::string byte_level_token_bytes(const std::string& token) {
  std::string raw;
  return byte_level_to_raw(token, raw) ? raw : token;
}

namespace {

class ByteLevel : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string bytes;
    for (const auto& t : tokens) bytes += byte_level_token_bytes(t);
    tokens.assign(1, unicode::utf8_lossy(bytes));
  }
  bool pure_byte_level() const override { return true; }
};

class ByteFallback : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::vector<std::string> out;
    std::string pending;
    auto flush = [&] {
      if (pending.empty()) return;
      // Complete UTF-8 becomes one string; anything else one U+FFFD per byte (HF).
      if (unicode::is_valid_utf8(pending)) out.push_back(pending);
      else
        for (size_t i = 0; i < pending.size(); ++i) out.push_back("\xEF\xBF\xBD");
      pending.clear();
    };
    for (const auto& t : tokens) {
      unsigned int b = 0;
      if (t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>' && std::sscanf(t.c_str() + 3, "%2X", &b) == 1) {
        pending.push_back(static_cast<char>(b));
      } else {
        flush();
        out.push_back(t);
      }
    }
    flush();
    tokens = std::move(out);
  }
};

class Fuse : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string all;
    for (const auto& t : tokens) all += t;
    tokens.assign(1, all);
  }
};

class Replace : public Decoder {
 public:
  Replace(std::string from, std::string to) : from_(std::move(from)), to_(std::move(to)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (auto& t : tokens) {
      std::string out;
      size_t pos = 0;
      for (size_t hit; !from_.empty() && (hit = t.find(from_, pos)) != std::string::npos; pos = hit + from_.size())
        out.append(t, pos, hit - pos).append(to_);
      out.append(t, pos, std::string::npos);
      t = std::move(out);
    }
  }

 private:
  std::string from_, to_;
};

class Strip : public Decoder {
 public:
  Strip(std::string content, size_t start, size_t stop) : content_(std::move(content)), start_(start), stop_(stop) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (auto& t : tokens) {
      std::vector<char32_t> cps;
      std::vector<uint32_t> offs;
      unicode::decode_utf8(t, cps, offs);
      std::vector<char32_t> c;
      unicode::decode_utf8(content_, c, offs);
      const char32_t ch = c.empty() ? 0 : c[0];
      size_t b = 0, e = cps.size();
      for (size_t k = 0; k < start_ && b < e && cps[b] == ch; ++k) ++b;
      for (size_t k = 0; k < stop_ && e > b && cps[e - 1] == ch; ++k) --e;
      std::string out;
      for (size_t i = b; i < e; ++i) unicode::append_utf8(out, cps[i]);
      t = std::move(out);
    }
  }

 private:
  std::string content_;
  size_t start_, stop_;
};

class Sequence : public Decoder {
 public:
  explicit Sequence(std::vector<std::unique_ptr<Decoder>> items) : items_(std::move(items)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (const auto& d : items_) d->decode_chain(tokens);
  }
  bool pure_byte_level() const override { return items_.size() == 1 && items_[0]->pure_byte_level(); }

 private:
  std::vector<std::unique_ptr<Decoder>> items_;
};

}  // namespace

std::unique_ptr<Decoder> make_decoder(const nlohmann::json& spec) {
  if (spec.is_null()) return nullptr;
  const std::string type = spec.value("type", "");
  if (type == "ByteLevel") return std::make_unique<ByteLevel>();
  if (type == "ByteFallback") return std::make_unique<ByteFallback>();
  if (type == "Fuse") return std::make_unique<Fuse>();
  if (type == "Replace") {
    const auto& p = spec.at("pattern");
    if (!p.contains("String")) throw Error(AREAL_CODE_UNSUPPORTED, "tokenizer.json: Replace decoder supports String patterns only");
    return std::make_unique<Replace>(p["String"].get<std::string>(), spec.value("content", ""));
  }
  if (type == "Strip") return std::make_unique<Strip>(spec.value("content", " "), spec.value("start", 0), spec.value("stop", 0));
  if (type == "Sequence") {
    std::vector<std::unique_ptr<Decoder>> items;
    for (const auto& d : spec.at("decoders"))
      if (auto item = make_decoder(d)) items.push_back(std::move(item));  // a null entry decodes nothing, as in HF
    return std::make_unique<Sequence>(std::move(items));
  }
  throw Error(AREAL_CODE_UNSUPPORTED, "tokenizer.json: decoder type '" + type + "' is not supported");
}

}  // namespace areal::tokenizer
