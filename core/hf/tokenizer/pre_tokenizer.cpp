#include "core/hf/tokenizer/pre_tokenizer.hpp"

#include <cstdint>

#include "core/plugin_host/error.hpp"
#include "core/hf/tokenizer/regex.hpp"
#include "core/hf/tokenizer/unicode.hpp"

namespace areal::tokenizer {
namespace {

using Json = nlohmann::json;

// GPT-2's pattern, used by ByteLevel with use_regex = true.
constexpr const char* kGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

enum class Behavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

Behavior behavior_of(const std::string& name) {
  if (name == "Removed") return Behavior::kRemoved;
  if (name == "Isolated") return Behavior::kIsolated;
  if (name == "MergedWithPrevious") return Behavior::kMergedWithPrevious;
  if (name == "MergedWithNext") return Behavior::kMergedWithNext;
  if (name == "Contiguous") return Behavior::kContiguous;
  throw Error(AREAL_CODE_UNSUPPORTED, "tokenizer.json: split behavior '" + name + "' is not supported");
}

// Splits each piece at the regex matches, as HF's NormalizedString::split.
class RegexSplit : public PreTokenizer {
 public:
  RegexSplit(std::string pattern, Behavior b, bool invert) : re_(pattern), behavior_(b), invert_(invert) {}

  void apply(Pieces& pieces) const override {
    std::vector<std::string_view> out;
    out.reserve(pieces.views.size() * 2);
    std::vector<char32_t> cps;
    std::vector<uint32_t> offs;
    std::vector<std::pair<uint32_t, uint32_t>> matches;
    std::vector<std::pair<std::string_view, bool>> spans;  // (text, is_match)
    for (std::string_view piece : pieces.views) {
      unicode::decode_utf8(piece, cps, offs);
      re_.find_all(cps, matches);
      spans.clear();
      uint32_t at = 0;
      auto view = [&](uint32_t b, uint32_t e) { return piece.substr(offs[b], offs[e] - offs[b]); };
      for (auto [b, e] : matches) {
        if (b > at) spans.emplace_back(view(at, b), invert_);
        spans.emplace_back(view(b, e), !invert_);
        at = e;
      }
      if (at < cps.size()) spans.emplace_back(view(at, static_cast<uint32_t>(cps.size())), invert_);
      combine(spans, piece, out);
    }
    pieces.views = std::move(out);
  }

 private:
  // Views are contiguous slices of `piece`, so merging two neighbours is a
  // wider slice of the same piece.
  static std::string_view join(std::string_view a, std::string_view b) {
    return std::string_view(a.data(), static_cast<size_t>(b.data() + b.size() - a.data()));
  }

  void combine(const std::vector<std::pair<std::string_view, bool>>& spans, std::string_view,
               std::vector<std::string_view>& out) const {
    switch (behavior_) {
      case Behavior::kIsolated:
        for (const auto& [v, m] : spans) out.push_back(v);
        break;
      case Behavior::kRemoved:
        for (const auto& [v, m] : spans)
          if (!m) out.push_back(v);
        break;
      // Semantics pinned by HF's doc example, `the-final--countdown` split on '-':
      // MergedWithPrevious -> the- final- - countdown; MergedWithNext -> the -final - -countdown.
      case Behavior::kMergedWithPrevious: {
        bool prev_non_match = false;
        for (const auto& [v, m] : spans) {
          if (m && prev_non_match) out.back() = join(out.back(), v);
          else out.push_back(v);
          prev_non_match = !m;
        }
        break;
      }
      case Behavior::kMergedWithNext: {
        std::vector<std::string_view> rev;
        bool next_non_match = false;
        for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
          if (it->second && next_non_match) rev.back() = join(it->first, rev.back());
          else rev.push_back(it->first);
          next_non_match = !it->second;
        }
        out.insert(out.end(), rev.rbegin(), rev.rend());
        break;
      }
      case Behavior::kContiguous: {
        bool prev_match = false;
        for (const auto& [v, m] : spans) {
          if (m && prev_match) out.back() = join(out.back(), v);
          else out.push_back(v);
          prev_match = m;
        }
        break;
      }
    }
  }

  Regex re_;
  Behavior behavior_;
  bool invert_;
};

class ByteLevel : public PreTokenizer {
 public:
  ByteLevel(bool add_prefix_space, bool use_regex) : add_prefix_space_(add_prefix_space) {
    if (use_regex) split_ = std::make_unique<RegexSplit>(kGpt2Pattern, Behavior::kIsolated, false);
  }
  void apply(Pieces& pieces) const override {
    if (add_prefix_space_) {
      for (auto& v : pieces.views) {
        if (!v.empty() && v.front() == ' ') continue;
        pieces.arena.push_back(" " + std::string(v));
        v = pieces.arena.back();
      }
    }
    if (split_) split_->apply(pieces);
  }
  bool byte_level() const override { return true; }

 private:
  bool add_prefix_space_;
  std::unique_ptr<RegexSplit> split_;
};

class Sequence : public PreTokenizer {
 public:
  explicit Sequence(std::vector<std::unique_ptr<PreTokenizer>> items) : items_(std::move(items)) {}
  void apply(Pieces& pieces) const override {
    for (const auto& p : items_) p->apply(pieces);
  }
  bool byte_level() const override {
    for (const auto& p : items_)
      if (p->byte_level()) return true;
    return false;
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> items_;
};

}  // namespace

std::unique_ptr<PreTokenizer> make_pre_tokenizer(const Json& spec) {
  if (spec.is_null()) return nullptr;
  const std::string type = spec.value("type", "");
  if (type == "Split") {
    const Json& p = spec.at("pattern");
    std::string pattern;
    if (p.contains("Regex")) pattern = p["Regex"].get<std::string>();
    else if (p.contains("String")) {
      // A literal: escape every regex metacharacter.
      for (char c : p["String"].get<std::string>()) {
        if (std::string("\\^$.|?*+()[]{}").find(c) != std::string::npos) pattern.push_back('\\');
        pattern.push_back(c);
      }
    } else {
      throw Error(AREAL_CODE_INVALID_ARGUMENT, "tokenizer.json: Split pattern must be Regex or String");
    }
    return std::make_unique<RegexSplit>(pattern, behavior_of(spec.value("behavior", "Isolated")), spec.value("invert", false));
  }
  if (type == "ByteLevel") return std::make_unique<ByteLevel>(spec.value("add_prefix_space", true), spec.value("use_regex", true));
  if (type == "Digits")
    return std::make_unique<RegexSplit>(spec.value("individual_digits", false) ? R"(\p{Nd})" : R"(\p{Nd}+)", Behavior::kIsolated, false);
  if (type == "Whitespace") return std::make_unique<RegexSplit>(R"(\w+|[^\w\s]+)", Behavior::kRemoved, true);
  if (type == "WhitespaceSplit") return std::make_unique<RegexSplit>(R"(\s+)", Behavior::kRemoved, false);
  if (type == "Sequence") {
    std::vector<std::unique_ptr<PreTokenizer>> items;
    for (const auto& s : spec.at("pretokenizers"))
      if (auto p = make_pre_tokenizer(s)) items.push_back(std::move(p));
    return std::make_unique<Sequence>(std::move(items));
  }
  throw Error(AREAL_CODE_UNSUPPORTED, "tokenizer.json: pre_tokenizer type '" + type + "' is not supported");
}

}  // namespace areal::tokenizer
