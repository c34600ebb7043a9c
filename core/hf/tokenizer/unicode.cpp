#include "core/hf/tokenizer/unicode.hpp"

#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>

#include "core/plugin_host/error.hpp"
#include "core/text/utf8.hpp"

namespace areal::unicode {
namespace {

// The sequence length a lead byte announces and the allowed range of its
// first continuation byte (Unicode Table 3-7); length 0 for a byte that
// cannot start a sequence.
struct Lead {
  size_t len;
  unsigned char lo, hi;
};
Lead lead(unsigned char c) {
  if (c < 0x80) return {1, 0x80, 0xBF};
  if (c >= 0xC2 && c <= 0xDF) return {2, 0x80, 0xBF};
  if (c == 0xE0) return {3, 0xA0, 0xBF};
  if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) return {3, 0x80, 0xBF};
  if (c == 0xED) return {3, 0x80, 0x9F};
  if (c == 0xF0) return {4, 0x90, 0xBF};
  if (c >= 0xF1 && c <= 0xF3) return {4, 0x80, 0xBF};
  if (c == 0xF4) return {4, 0x80, 0x8F};
  return {0, 0, 0};
}

// How many bytes from s[i] continue the sequence validly (at most the
// announced length).
size_t valid_prefix(std::string_view s, size_t i, const Lead& l) {
  size_t k = 1;
  for (; k < l.len && i + k < s.size(); ++k) {
    const unsigned char x = static_cast<unsigned char>(s[i + k]);
    if (x < (k == 1 ? l.lo : 0x80) || x > (k == 1 ? l.hi : 0xBF)) break;
  }
  return k;
}

// Length of a valid UTF-8 sequence starting at s[i], or 0 if invalid there;
// `incomplete` is set when the input ends inside an otherwise valid sequence.
size_t valid_sequence(std::string_view s, size_t i, bool* incomplete = nullptr) {
  const Lead l = lead(static_cast<unsigned char>(s[i]));
  if (l.len == 0) return 0;
  const size_t k = valid_prefix(s, i, l);
  if (k == l.len) return l.len;
  if (incomplete && i + k >= s.size()) *incomplete = true;
  return 0;
}

// Length of the maximal invalid subpart at s[i] (what one U+FFFD replaces).
size_t invalid_run(std::string_view s, size_t i) {
  const Lead l = lead(static_cast<unsigned char>(s[i]));
  return l.len <= 1 ? 1 : valid_prefix(s, i, l);
}

char32_t decode_at(std::string_view s, size_t i, size_t len) {
  const auto b = [&](size_t k) { return static_cast<char32_t>(static_cast<unsigned char>(s[i + k])); };
  switch (len) {
    case 1: return b(0);
    case 2: return ((b(0) & 0x1F) << 6) | (b(1) & 0x3F);
    case 3: return ((b(0) & 0x0F) << 12) | ((b(1) & 0x3F) << 6) | (b(2) & 0x3F);
    default: return ((b(0) & 0x07) << 18) | ((b(1) & 0x3F) << 12) | ((b(2) & 0x3F) << 6) | (b(3) & 0x3F);
  }
}

std::string normalize(std::string_view text, const icu::Normalizer2* (*instance)(UErrorCode&), const char* name) {
  UErrorCode err = U_ZERO_ERROR;
  const icu::Normalizer2* n = instance(err);
  if (U_FAILURE(err)) throw Error(AREAL_CODE_INTERNAL, std::string("ICU ") + name + " normalizer unavailable");
  icu::UnicodeString src = icu::UnicodeString::fromUTF8(icu::StringPiece(text.data(), static_cast<int32_t>(text.size())));
  icu::UnicodeString dst = n->normalize(src, err);
  if (U_FAILURE(err)) throw Error(AREAL_CODE_INTERNAL, std::string("ICU ") + name + " normalization failed");
  std::string out;
  dst.toUTF8String(out);
  return out;
}

int8_t category(char32_t c) { return u_charType(static_cast<UChar32>(c)); }

}  // namespace

void decode_utf8(std::string_view text, std::vector<char32_t>& cps, std::vector<uint32_t>& offsets) {
  cps.clear();
  offsets.clear();
  cps.reserve(text.size());
  offsets.reserve(text.size() + 1);
  for (size_t i = 0; i < text.size();) {
    const size_t len = valid_sequence(text, i);
    offsets.push_back(static_cast<uint32_t>(i));
    if (len == 0) {
      cps.push_back(0xFFFD);
      i += 1;
    } else {
      cps.push_back(decode_at(text, i, len));
      i += len;
    }
  }
  offsets.push_back(static_cast<uint32_t>(text.size()));
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

bool is_valid_utf8(std::string_view text) { return text::first_invalid_utf8(text) == std::string_view::npos; }

std::string utf8_lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  for (size_t i = 0; i < bytes.size();) {
    const size_t len = valid_sequence(bytes, i);
    if (len > 0) {
      out.append(bytes.data() + i, len);
      i += len;
    } else {
      out.append("\xEF\xBF\xBD");
      i += invalid_run(bytes, i);
    }
  }
  return out;
}

size_t complete_utf8_prefix(std::string_view bytes) {
  // Only the last three bytes can start an incomplete sequence.
  const size_t start = bytes.size() > 3 ? bytes.size() - 3 : 0;
  for (size_t i = start; i < bytes.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(bytes[i]);
    if ((c & 0xC0) == 0x80) continue;  // continuation byte
    bool incomplete = false;
    if (valid_sequence(bytes, i, &incomplete) == 0 && incomplete) return i;
  }
  return bytes.size();
}

bool is_letter(char32_t c) {
  if (c < 0x80) return (c | 0x20) >= 'a' && (c | 0x20) <= 'z';
  const int8_t t = category(c);
  return t == U_UPPERCASE_LETTER || t == U_LOWERCASE_LETTER || t == U_TITLECASE_LETTER || t == U_MODIFIER_LETTER ||
         t == U_OTHER_LETTER;
}
bool is_number(char32_t c) {
  if (c < 0x80) return c >= '0' && c <= '9';
  const int8_t t = category(c);
  return t == U_DECIMAL_DIGIT_NUMBER || t == U_LETTER_NUMBER || t == U_OTHER_NUMBER;
}
bool is_punctuation(char32_t c) {
  const int8_t t = category(c);
  return t == U_CONNECTOR_PUNCTUATION || t == U_DASH_PUNCTUATION || t == U_START_PUNCTUATION ||
         t == U_END_PUNCTUATION || t == U_INITIAL_PUNCTUATION || t == U_FINAL_PUNCTUATION || t == U_OTHER_PUNCTUATION;
}
bool is_symbol(char32_t c) {
  const int8_t t = category(c);
  return t == U_MATH_SYMBOL || t == U_CURRENCY_SYMBOL || t == U_MODIFIER_SYMBOL || t == U_OTHER_SYMBOL;
}
bool is_mark(char32_t c) {
  const int8_t t = category(c);
  return t == U_NON_SPACING_MARK || t == U_ENCLOSING_MARK || t == U_COMBINING_SPACING_MARK;
}
bool is_separator(char32_t c) {
  const int8_t t = category(c);
  return t == U_SPACE_SEPARATOR || t == U_LINE_SEPARATOR || t == U_PARAGRAPH_SEPARATOR;
}
bool is_control(char32_t c) {
  const int8_t t = category(c);
  return t == U_CONTROL_CHAR || t == U_FORMAT_CHAR || t == U_SURROGATE || t == U_PRIVATE_USE_CHAR || t == U_UNASSIGNED;
}
bool is_white_space(char32_t c) {
  if (c < 0x80) return c == ' ' || (c >= 0x09 && c <= 0x0D);
  return u_hasBinaryProperty(static_cast<UChar32>(c), UCHAR_WHITE_SPACE);
}
bool is_digit(char32_t c) {
  if (c < 0x80) return c >= '0' && c <= '9';
  return category(c) == U_DECIMAL_DIGIT_NUMBER;
}
bool is_word(char32_t c) {
  if (c < 0x80) return is_letter(c) || is_digit(c) || c == '_';
  return is_letter(c) || is_mark(c) || is_number(c) || category(c) == U_CONNECTOR_PUNCTUATION;
}
char32_t fold_case(char32_t c) { return static_cast<char32_t>(u_foldCase(static_cast<UChar32>(c), U_FOLD_CASE_DEFAULT)); }
char32_t to_lower(char32_t c) { return static_cast<char32_t>(u_tolower(static_cast<UChar32>(c))); }
char32_t to_upper(char32_t c) { return static_cast<char32_t>(u_toupper(static_cast<UChar32>(c))); }

std::string normalize_nfc(std::string_view t) { return normalize(t, &icu::Normalizer2::getNFCInstance, "NFC"); }
std::string normalize_nfd(std::string_view t) { return normalize(t, &icu::Normalizer2::getNFDInstance, "NFD"); }
std::string normalize_nfkc(std::string_view t) { return normalize(t, &icu::Normalizer2::getNFKCInstance, "NFKC"); }
std::string normalize_nfkd(std::string_view t) { return normalize(t, &icu::Normalizer2::getNFKDInstance, "NFKD"); }

bool is_nfc(std::string_view text) {
  bool ascii = true;
  for (char ch : text) ascii = ascii && static_cast<unsigned char>(ch) < 0x80;
  if (ascii) return true;
  UErrorCode err = U_ZERO_ERROR;
  const icu::Normalizer2* n = icu::Normalizer2::getNFCInstance(err);
  if (U_FAILURE(err)) return false;
  icu::UnicodeString src = icu::UnicodeString::fromUTF8(icu::StringPiece(text.data(), static_cast<int32_t>(text.size())));
  UBool yes = n->isNormalized(src, err);
  return U_SUCCESS(err) && yes;
}

}  // namespace areal::unicode
