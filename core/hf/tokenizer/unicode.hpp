// UTF-8 and Unicode helpers for the tokenizer. Character properties and
// normalization come from ICU (Debian libicu-dev), so they follow the same
// Unicode data as the reference tokenizers instead of hand-made tables.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace areal::unicode {

// Decodes UTF-8 into code points, recording each code point's byte offset
// (offsets.size() == cps.size() + 1; the last entry is text.size()).
// Invalid bytes decode as U+FFFD covering one byte, so every byte belongs to
// exactly one code point and offsets always partition the input.
void decode_utf8(std::string_view text, std::vector<char32_t>& cps, std::vector<uint32_t>& offsets);

void append_utf8(std::string& out, char32_t cp);

bool is_valid_utf8(std::string_view text);

// Rust's String::from_utf8_lossy: each maximal invalid subsequence becomes
// one U+FFFD. (HF decoders use it, so parity needs the exact rule.)
std::string utf8_lossy(std::string_view bytes);

// Length of the longest prefix of `bytes` that does not end inside an
// incomplete (but so far valid) UTF-8 sequence.
size_t complete_utf8_prefix(std::string_view bytes);

// General-category groups as used by regex \p{..}.
bool is_letter(char32_t c);       // L
bool is_number(char32_t c);       // N
bool is_punctuation(char32_t c);  // P
bool is_symbol(char32_t c);       // S
bool is_mark(char32_t c);         // M
bool is_separator(char32_t c);    // Z
bool is_control(char32_t c);      // C
bool is_white_space(char32_t c);  // White_Space property (Oniguruma's \s)
bool is_word(char32_t c);         // \w: letter, mark, number, connector punctuation
bool is_digit(char32_t c);        // \d: Nd
char32_t fold_case(char32_t c);   // simple case folding, for (?i)
char32_t to_lower(char32_t c);
char32_t to_upper(char32_t c);

// Normalization forms; throws areal::Error on ICU failure.
std::string normalize_nfc(std::string_view text);
std::string normalize_nfd(std::string_view text);
std::string normalize_nfkc(std::string_view text);
std::string normalize_nfkd(std::string_view text);
bool is_nfc(std::string_view text);  // quick check, to skip work on the common case

}  // namespace areal::unicode
