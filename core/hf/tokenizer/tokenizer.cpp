#include "core/hf/tokenizer/tokenizer.hpp"

#include <deque>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <algorithm>

#include "core/plugin_host/error.hpp"
#include "core/hf/tokenizer/unicode.hpp"
#include "core/hf/tokenizer/token_id.hpp"

namespace areal::tokenizer {
namespace {

using Json = nlohmann::json;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(AREAL_CODE_NOT_FOUND, "cannot read '" + path + "'");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Post-processor -> fixed ids before/after the sequence (single input).
void parse_post_processor(const Json& spec, const AddedVocabulary& added, const BpeModel& model,
                          std::vector<int32_t>& prefix, std::vector<int32_t>& suffix) {
  if (spec.is_null()) return;
  const std::string type = spec.value("type", "");
  if (type == "ByteLevel") return;  // affects offsets only
  if (type == "Sequence") {
    for (const auto& p : spec.at("processors")) parse_post_processor(p, added, model, prefix, suffix);
    return;
  }
  if (type == "TemplateProcessing") {
    const Json& specials = spec.value("special_tokens", Json::object());
    bool seen_sequence = false;
    for (const auto& item : spec.at("single")) {
      if (item.contains("Sequence")) {
        seen_sequence = true;
        continue;
      }
      const std::string name = item.at("SpecialToken").at("id").get<std::string>();
      if (!specials.contains(name)) throw Error(AREAL_CODE_INVALID_ARGUMENT, "tokenizer.json: template names unknown special token '" + name + "'");
      for (const auto& id : specials[name].at("ids")) (seen_sequence ? suffix : prefix).push_back(token_id(id, "special token '" + name + "'"));
    }
    return;
  }
  if (type == "RobertaProcessing" || type == "BertProcessing") {
    const auto cls = spec.at("cls"), sep = spec.at("sep");  // ["<s>", 0]
    prefix.push_back(token_id(cls.at(1), "cls"));
    suffix.push_back(token_id(sep.at(1), "sep"));
    return;
  }
  throw Error(AREAL_CODE_UNSUPPORTED, "tokenizer.json: post_processor type '" + type + "' is not supported");
}

}  // namespace

std::shared_ptr<const Tokenizer> Tokenizer::from_dir(const std::string& dir) {
  const std::string tok_path = (std::filesystem::path(dir) / "tokenizer.json").string();
  const std::string cfg_path = (std::filesystem::path(dir) / "tokenizer_config.json").string();
  if (!std::filesystem::is_directory(dir)) throw Error(AREAL_CODE_NOT_FOUND, "tokenizer folder '" + dir + "' does not exist");
  Json config = nullptr;
  if (std::filesystem::exists(cfg_path)) {
    try {
      config = Json::parse(read_file(cfg_path));
    } catch (const Json::exception& e) {
      throw Error(AREAL_CODE_INVALID_ARGUMENT, cfg_path + ": not valid JSON: " + e.what());
    }
  }
  return from_json(read_file(tok_path), std::move(config), tok_path);
}

std::shared_ptr<const Tokenizer> Tokenizer::from_json(const std::string& text, Json config, const std::string& source) {
  std::shared_ptr<Tokenizer> t(new Tokenizer());
  try {
    Json spec;
    try {
      spec = Json::parse(text);
    } catch (const Json::exception& e) {
      throw Error(AREAL_CODE_INVALID_ARGUMENT, std::string("not valid JSON: ") + e.what());
    }
    if (!spec.is_object() || !spec.contains("model")) throw Error(AREAL_CODE_INVALID_ARGUMENT, "no \"model\" section: not a tokenizer.json");
    if (spec.contains("truncation") && !spec["truncation"].is_null())
      throw Error(AREAL_CODE_UNSUPPORTED, "truncation is configured; areal never truncates prompts silently");
    t->normalizer_ = make_normalizer(spec.value("normalizer", Json()));
    t->pre_tokenizer_ = make_pre_tokenizer(spec.value("pre_tokenizer", Json()));
    const bool byte_level = t->pre_tokenizer_ && t->pre_tokenizer_->byte_level();
    t->model_ = std::make_unique<BpeModel>(spec["model"], byte_level);
    t->decoder_ = make_decoder(spec.value("decoder", Json()));
    t->added_ = std::make_unique<AddedVocabulary>(spec.value("added_tokens", Json::array()));
    parse_post_processor(spec.value("post_processor", Json()), *t->added_, *t->model_, t->prefix_ids_, t->suffix_ids_);
  } catch (const Error& e) {
    throw Error(e.code(), source + ": " + e.what());
  } catch (const Json::exception& e) {
    throw Error(AREAL_CODE_INVALID_ARGUMENT, source + ": malformed tokenizer: " + e.what());
  }
  t->vocab_size_ = t->model_->vocab_size();
  for (const auto& a : t->added_->tokens()) t->vocab_size_ = std::max(t->vocab_size_, static_cast<size_t>(a.id) + 1);
  t->pure_byte_level_ = t->decoder_ && t->decoder_->pure_byte_level();
  if (t->pure_byte_level_) {
    t->id_bytes_.resize(t->vocab_size_);
    for (size_t id = 0; id < t->vocab_size_; ++id) {
      const std::string tok = t->id_to_token(static_cast<int32_t>(id));
      if (!tok.empty()) t->id_bytes_[id] = byte_level_token_bytes(tok);
    }
  }
  t->config_ = std::move(config);
  return t;
}

int32_t Tokenizer::token_to_id(const std::string& token) const {
  if (const AddedToken* a = added_->by_content(token)) return a->id;
  return model_->id_of(token);
}

std::string Tokenizer::id_to_token(int32_t id) const {
  if (const AddedToken* a = added_->by_id(id)) return a->content;
  return model_->token(id);
}

bool Tokenizer::is_special(int32_t id) const {
  const AddedToken* a = added_->by_id(id);
  return a != nullptr && a->special;
}

bool Tokenizer::has_token(int32_t id) const {
  return id >= 0 && static_cast<size_t>(id) < vocab_size_ && (added_->by_id(id) != nullptr || !model_->token(id).empty());
}

const std::string& Tokenizer::token_bytes(int32_t id) const {
  static const std::string kNoBytes;
  if (!pure_byte_level_) throw Error(AREAL_CODE_UNSUPPORTED, "token_bytes needs a byte-level decoder");
  return has_token(id) ? id_bytes_[id] : kNoBytes;
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens, bool parse_special) const {
  if (!model_->byte_level() && !unicode::is_valid_utf8(text))
    throw Error(AREAL_CODE_INVALID_ARGUMENT, "text is not valid UTF-8 (only byte-level tokenizers accept raw bytes)");
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  std::vector<Segment> original, normalized_segments;
  added_->split(text, /*normalized_phase=*/false, parse_special, original);
  std::deque<std::string> normalized_store;
  Pieces pieces;
  for (const Segment& seg : original) {
    if (seg.id >= 0) {
      ids.push_back(seg.id);
      continue;
    }
    std::string_view view = seg.text;
    if (normalizer_) {
      normalized_store.emplace_back(seg.text);
      normalizer_->apply(normalized_store.back());
      view = normalized_store.back();
    }
    normalized_segments.clear();
    added_->split(view, /*normalized_phase=*/true, parse_special, normalized_segments);
    for (const Segment& s : normalized_segments) {
      if (s.id >= 0) {
        ids.push_back(s.id);
        continue;
      }
      pieces.views.assign(1, s.text);
      pieces.arena.clear();
      if (pre_tokenizer_) pre_tokenizer_->apply(pieces);
      for (std::string_view p : pieces.views) model_->encode(p, ids);
    }
  }
  if (add_special_tokens) post_process(ids);
  return ids;
}

void Tokenizer::post_process(std::vector<int32_t>& ids) const {
  if (prefix_ids_.empty() && suffix_ids_.empty()) return;
  ids.insert(ids.begin(), prefix_ids_.begin(), prefix_ids_.end());
  ids.insert(ids.end(), suffix_ids_.begin(), suffix_ids_.end());
}

std::string Tokenizer::decode_bytes(const std::vector<int32_t>& ids, bool skip_special) const {
  if (!pure_byte_level_) throw Error(AREAL_CODE_UNSUPPORTED, "decode_bytes needs a byte-level decoder");
  std::string out;
  for (int32_t id : ids) {
    if (!has_token(id) || (skip_special && is_special(id))) continue;
    out += id_bytes_[id];
  }
  return out;
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids, bool skip_special) const {
  if (pure_byte_level_) return unicode::utf8_lossy(decode_bytes(ids, skip_special));
  std::vector<std::string> tokens;
  for (int32_t id : ids) {
    if (!has_token(id) || (skip_special && is_special(id))) continue;
    tokens.push_back(id_to_token(id));
  }
  if (!decoder_) {
    std::string joined;
    for (size_t i = 0; i < tokens.size(); ++i) joined += (i ? " " : "") + tokens[i];
    return joined;
  }
  decoder_->decode_chain(tokens);
  std::string out;
  for (const auto& t : tokens) out += t;
  return out;
}

IncrementalDecoder::IncrementalDecoder(std::shared_ptr<const Tokenizer> tokenizer, bool skip_special)
    : tok_(std::move(tokenizer)), skip_special_(skip_special) {}

std::string IncrementalDecoder::push(int32_t id) {
  if (tok_->byte_level_decoding()) {
    const std::string& bytes = tok_->token_bytes(id);
    if (skip_special_ && tok_->is_special(id)) return {};
    pending_ += bytes;
    const size_t complete = unicode::complete_utf8_prefix(pending_);
    std::string out = unicode::utf8_lossy(std::string_view(pending_).substr(0, complete));
    pending_.erase(0, complete);
    return out;
  }
  // Generic decoders: decode the whole prefix and return what is new, holding
  // back a trailing U+FFFD that a later token may still complete.
  ids_.push_back(id);
  const std::string all = tok_->decode(ids_, skip_special_);
  size_t stable = all.size();
  while (stable >= 3 && all.compare(stable - 3, 3, "\xEF\xBF\xBD") == 0) stable -= 3;
  if (stable <= emitted_chars_) return {};
  std::string out = all.substr(emitted_chars_, stable - emitted_chars_);
  emitted_chars_ = stable;
  return out;
}

std::string IncrementalDecoder::finish() {
  if (tok_->byte_level_decoding()) {
    std::string out = unicode::utf8_lossy(pending_);
    pending_.clear();
    return out;
  }
  const std::string all = tok_->decode(ids_, skip_special_);
  std::string out = all.size() > emitted_chars_ ? all.substr(emitted_chars_) : std::string();
  emitted_chars_ = all.size();
  return out;
}

}  // namespace areal::tokenizer
