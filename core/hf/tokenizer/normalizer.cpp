#include "core/hf/tokenizer/normalizer.hpp"

#include <cstdint>
#include <string_view>

#include "core/plugin_host/error.hpp"
#include "core/hf/tokenizer/regex.hpp"
#include "core/hf/tokenizer/unicode.hpp"

namespace areal::tokenizer {
namespace {

using Json = nlohmann::json;

// Applies `f` to each maximal valid UTF-8 run, leaving invalid bytes as they are.
template <class F>
void on_valid_runs(std::string& text, F&& f) {
  if (unicode::is_valid_utf8(text)) {
    text = f(text);
    return;
  }
  std::vector<char32_t> cps;
  std::vector<uint32_t> offs;
  unicode::decode_utf8(text, cps, offs);
  std::string out, run;
  for (size_t i = 0; i < cps.size(); ++i) {
    std::string_view bytes(text.data() + offs[i], offs[i + 1] - offs[i]);
    const bool invalid = cps[i] == 0xFFFD && !unicode::is_valid_utf8(bytes);
    if (invalid) {
      out += f(run);
      run.clear();
      out.append(bytes);
    } else {
      run.append(bytes);
    }
  }
  out += f(run);
  text = std::move(out);
}

class Unicode : public Normalizer {
 public:
  explicit Unicode(std::string (*fn)(std::string_view), bool nfc) : fn_(fn), nfc_(nfc) {}
  void apply(std::string& text) const override {
    if (nfc_ && unicode::is_nfc(text)) return;  // the common case costs one scan
    on_valid_runs(text, [&](const std::string& s) { return fn_(s); });
  }

 private:
  std::string (*fn_)(std::string_view);
  bool nfc_;
};

class Lowercase : public Normalizer {
 public:
  void apply(std::string& text) const override {
    on_valid_runs(text, [](const std::string& s) {
      std::vector<char32_t> cps;
      std::vector<uint32_t> offs;
      unicode::decode_utf8(s, cps, offs);
      std::string out;
      for (char32_t c : cps) unicode::append_utf8(out, unicode::to_lower(c));
      return out;
    });
  }
};

class Strip : public Normalizer {
 public:
  Strip(bool left, bool right) : left_(left), right_(right) {}
  void apply(std::string& text) const override {
    std::vector<char32_t> cps;
    std::vector<uint32_t> offs;
    unicode::decode_utf8(text, cps, offs);
    size_t b = 0, e = cps.size();
    if (left_)
      while (b < e && unicode::is_white_space(cps[b])) ++b;
    if (right_)
      while (e > b && unicode::is_white_space(cps[e - 1])) --e;
    text = text.substr(offs[b], offs[e] - offs[b]);
  }

 private:
  bool left_, right_;
};

class Replace : public Normalizer {
 public:
  Replace(const Json& pattern, std::string content) : content_(std::move(content)) {
    if (pattern.contains("String")) literal_ = pattern["String"].get<std::string>();
    else if (pattern.contains("Regex")) regex_ = std::make_unique<Regex>(pattern["Regex"].get<std::string>());
    else throw Error(AREAL_CODE_INVALID_ARGUMENT, "Replace normalizer: pattern must be String or Regex");
  }
  void apply(std::string& text) const override {
    if (!regex_) {
      if (literal_.empty()) return;
      std::string out;
      size_t pos = 0;
      for (size_t hit; (hit = text.find(literal_, pos)) != std::string::npos; pos = hit + literal_.size())
        out.append(text, pos, hit - pos).append(content_);
      out.append(text, pos, std::string::npos);
      text = std::move(out);
      return;
    }
    std::vector<char32_t> cps;
    std::vector<uint32_t> offs;
    unicode::decode_utf8(text, cps, offs);
    std::vector<std::pair<uint32_t, uint32_t>> m;
    regex_->find_all(cps, m);
    std::string out;
    uint32_t at = 0;
    for (auto [b, e] : m) {
      out.append(text, offs[at], offs[b] - offs[at]).append(content_);
      at = e;
    }
    out.append(text, offs[at], std::string::npos);
    text = std::move(out);
  }

 private:
  std::string literal_;
  std::unique_ptr<Regex> regex_;
  std::string content_;
};

class Prepend : public Normalizer {
 public:
  explicit Prepend(std::string p) : p_(std::move(p)) {}
  void apply(std::string& text) const override {
    if (!text.empty()) text.insert(0, p_);
  }

 private:
  std::string p_;
};

class Sequence : public Normalizer {
 public:
  explicit Sequence(std::vector<std::unique_ptr<Normalizer>> items) : items_(std::move(items)) {}
  void apply(std::string& text) const override {
    for (const auto& n : items_) n->apply(text);
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> items_;
};

}  // namespace

std::unique_ptr<Normalizer> make_normalizer(const Json& spec) {
  if (spec.is_null()) return nullptr;
  const std::string type = spec.value("type", "");
  if (type == "NFC") return std::make_unique<Unicode>(&unicode::normalize_nfc, true);
  if (type == "NFD") return std::make_unique<Unicode>(&unicode::normalize_nfd, false);
  if (type == "NFKC") return std::make_unique<Unicode>(&unicode::normalize_nfkc, false);
  if (type == "NFKD") return std::make_unique<Unicode>(&unicode::normalize_nfkd, false);
  if (type == "Lowercase") return std::make_unique<Lowercase>();
  if (type == "Strip") return std::make_unique<Strip>(spec.value("strip_left", true), spec.value("strip_right", true));
  if (type == "Replace") return std::make_unique<Replace>(spec.at("pattern"), spec.value("content", ""));
  if (type == "Prepend") return std::make_unique<Prepend>(spec.value("prepend", ""));
  if (type == "Sequence") {
    std::vector<std::unique_ptr<Normalizer>> items;
    for (const auto& s : spec.at("normalizers"))
      if (auto n = make_normalizer(s)) items.push_back(std::move(n));
    if (items.empty()) return nullptr;
    return std::make_unique<Sequence>(std::move(items));
  }
  throw Error(AREAL_CODE_UNSUPPORTED, "tokenizer.json: normalizer type '" + type + "' is not supported");
}

}  // namespace areal::tokenizer
