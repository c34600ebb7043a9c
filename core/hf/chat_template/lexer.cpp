#include <cctype>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>
#include <exception>

#include "ast.hpp"
#include "core/plugin_host/error.hpp"
#include "core/hf/tokenizer/unicode.hpp"

namespace areal::jinja {
namespace {

[[noreturn]] void fail(Pos p, const std::string& what) {
  throw Error(AREAL_CODE_INVALID_ARGUMENT, "template:" + std::to_string(p.line) + ":" + std::to_string(p.col) + ": " + what);
}

struct Cursor {
  std::string_view src;
  size_t i = 0;
  Pos pos;
  void advance(size_t n = 1) {
    for (size_t k = 0; k < n && i < src.size(); ++k, ++i) {
      if (src[i] == '\n') {
        ++pos.line;
        pos.col = 1;
      } else if ((static_cast<unsigned char>(src[i]) & 0xC0) != 0x80) {
        ++pos.col;  // count characters, not UTF-8 continuation bytes
      }
    }
  }
};

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

// Tokens inside {{ }} / {% %} until the closing marker; returns whether the
// closer had a '-' (strip following whitespace) or '+'.
char lex_tag(Cursor& c, const char* close, std::vector<Token>& out) {
  while (true) {
    while (c.i < c.src.size() && is_space(c.src[c.i])) c.advance();
    if (c.i >= c.src.size()) fail(c.pos, std::string("unclosed tag: expected '") + close + "'");
    const Pos start = c.pos;
    const char ch = c.src[c.i];
    // Closing marker, optionally preceded by - or +.
    if ((ch == '-' || ch == '+') && c.src.compare(c.i + 1, 2, close) == 0) {
      c.advance(3);
      return ch;
    }
    if (c.src.compare(c.i, 2, close) == 0) {
      c.advance(2);
      return 0;
    }
    if (std::isalpha(static_cast<unsigned char>(ch)) || ch == '_') {
      size_t j = c.i;
      while (j < c.src.size() && (std::isalnum(static_cast<unsigned char>(c.src[j])) || c.src[j] == '_')) ++j;
      out.push_back({Token::kName, std::string(c.src.substr(c.i, j - c.i)), 0, 0, start});
      c.advance(j - c.i);
      continue;
    }
    if (std::isdigit(static_cast<unsigned char>(ch))) {
      size_t j = c.i;
      bool is_float = false;
      while (j < c.src.size() && (std::isdigit(static_cast<unsigned char>(c.src[j])) || c.src[j] == '_')) ++j;
      if (j + 1 < c.src.size() && c.src[j] == '.' && std::isdigit(static_cast<unsigned char>(c.src[j + 1]))) {
        is_float = true;
        ++j;
        while (j < c.src.size() && (std::isdigit(static_cast<unsigned char>(c.src[j])) || c.src[j] == '_')) ++j;
      }
      if (j < c.src.size() && (c.src[j] == 'e' || c.src[j] == 'E')) {
        size_t k = j + 1;
        if (k < c.src.size() && (c.src[k] == '+' || c.src[k] == '-')) ++k;
        if (k < c.src.size() && std::isdigit(static_cast<unsigned char>(c.src[k]))) {
          is_float = true;
          j = k;
          while (j < c.src.size() && std::isdigit(static_cast<unsigned char>(c.src[j]))) ++j;
        }
      }
      std::string text;
      for (size_t k = c.i; k < j; ++k)
        if (c.src[k] != '_') text.push_back(c.src[k]);
      Token t{is_float ? Token::kFloat : Token::kInt, text, 0, 0, start};
      try {
        if (is_float) t.d = std::stod(text);
        else t.i = std::stoll(text);
      } catch (const std::exception&) {
        fail(start, "number out of range: " + text);
      }
      out.push_back(t);
      c.advance(j - c.i);
      continue;
    }
    if (ch == '\'' || ch == '"') {
      std::string value;
      c.advance();
      while (true) {
        if (c.i >= c.src.size()) fail(start, "unterminated string literal");
        const char x = c.src[c.i];
        if (x == ch) {
          c.advance();
          break;
        }
        if (x == '\\' && c.i + 1 < c.src.size()) {
          const char e = c.src[c.i + 1];
          c.advance(2);
          // Python's unicode-escape, as Jinja2 decodes string literals.
          auto hex_digits = [&](size_t n) {
            uint32_t cp = 0;
            for (size_t k = 0; k < n; ++k, c.advance()) {
              const char h = c.i < c.src.size() ? c.src[c.i] : 0;
              if (!std::isxdigit(static_cast<unsigned char>(h))) fail(start, std::string("truncated \\") + e + " escape in a string literal");
              cp = cp * 16 + static_cast<uint32_t>(std::isdigit(static_cast<unsigned char>(h)) ? h - '0' : (std::tolower(h) - 'a' + 10));
            }
            if (cp > 0x10FFFF) fail(start, "\\U escape past U+10FFFF in a string literal");
            return cp;
          };
          switch (e) {
            case 'n': value += '\n'; break;
            case 't': value += '\t'; break;
            case 'r': value += '\r'; break;
            case 'a': value += '\a'; break;
            case 'b': value += '\b'; break;
            case 'f': value += '\f'; break;
            case 'v': value += '\v'; break;
            case '\n': break;  // a backslash-newline continues the line
            case '\\': value += '\\'; break;
            case '\'': value += '\''; break;
            case '"': value += '"'; break;
            case 'x': unicode::append_utf8(value, hex_digits(2)); break;
            case 'u': unicode::append_utf8(value, hex_digits(4)); break;
            case 'U': unicode::append_utf8(value, hex_digits(8)); break;
            case 'N': fail(start, "\\N{...} escapes are not supported in template string literals; write the character itself");
            default:
              if (e >= '0' && e <= '7') {
                uint32_t cp = static_cast<uint32_t>(e - '0');
                for (int k = 0; k < 2 && c.i < c.src.size() && c.src[c.i] >= '0' && c.src[c.i] <= '7'; ++k, c.advance())
                  cp = cp * 8 + static_cast<uint32_t>(c.src[c.i] - '0');
                unicode::append_utf8(value, cp);
              } else {
                value += '\\', value += e;  // Python keeps unknown escapes verbatim
              }
          }
          continue;
        }
        value += x;
        c.advance();
      }
      out.push_back({Token::kString, value, 0, 0, start});
      continue;
    }
    static const char* const kOps[] = {"**", "//", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<", ">",
                                       "=",  "(",  ")",  "[",  "]",  "{",  "}", ",", ".", ":", "|"};
    bool matched = false;
    for (const char* op : kOps) {
      const size_t n = std::char_traits<char>::length(op);
      if (c.src.compare(c.i, n, op) == 0) {
        out.push_back({Token::kOp, op, 0, 0, start});
        c.advance(n);
        matched = true;
        break;
      }
    }
    if (!matched) fail(start, std::string("unexpected character '") + ch + "'");
  }
}

}  // namespace

std::vector<Token> lex(std::string_view source) {
  // Jinja2 reads "\r\n" and "\r" as "\n", and (keep_trailing_newline
  // False, as transformers leaves it) drops one newline that ends the source.
  std::string normalized;
  normalized.reserve(source.size());
  for (size_t k = 0; k < source.size(); ++k) {
    if (source[k] != '\r') normalized += source[k];
    else if (k + 1 < source.size() && source[k + 1] == '\n') continue;  // the '\n' comes next
    else normalized += '\n';
  }
  if (!normalized.empty() && normalized.back() == '\n') normalized.pop_back();
  const std::string_view src = normalized;
  std::vector<Token> out;
  Cursor c{src, 0, Pos{}};
  bool strip_next = false;    // a '-' closer: drop leading whitespace of the next text
  bool line_starting = true;  // Jinja2's lstrip_blocks rule: text starts a line
  while (c.i < src.size()) {
    size_t at = src.find('{', c.i);
    while (at != std::string_view::npos && at + 1 < src.size() && src[at + 1] != '{' && src[at + 1] != '%' && src[at + 1] != '#')
      at = src.find('{', at + 1);
    if (at + 1 >= src.size()) at = std::string_view::npos;
    const size_t text_end = at == std::string_view::npos ? src.size() : at;
    std::string text(src.substr(c.i, text_end - c.i));
    const Pos text_pos = c.pos;
    if (strip_next) {
      size_t k = 0;
      while (k < text.size() && is_space(text[k])) ++k;
      text.erase(0, k);
      strip_next = false;
    }
    if (at == std::string_view::npos) {
      if (!text.empty()) out.push_back({Token::kText, text, 0, 0, text_pos});
      c.advance(text_end - c.i);
      break;
    }
    const char kind = src[at + 1];
    const char ctrl = at + 2 < src.size() ? src[at + 2] : 0;
    if (ctrl == '-') {
      while (!text.empty() && is_space(text.back())) text.pop_back();
    } else if (kind != '{' && ctrl != '+') {
      // lstrip_blocks: whitespace between a line start and a block or comment tag goes.
      const size_t nl = text.rfind('\n');
      const size_t line_start = nl == std::string::npos ? 0 : nl + 1;
      if (nl != std::string::npos || line_starting) {
        bool blank = line_start < text.size();
        for (size_t k = line_start; k < text.size(); ++k) blank = blank && is_space(text[k]);
        if (blank) text.erase(line_start);
      }
    }
    if (!text.empty()) out.push_back({Token::kText, text, 0, 0, text_pos});
    c.advance(text_end - c.i);
    const Pos tag_pos = c.pos;
    c.advance(2);
    if (ctrl == '-' || ctrl == '+') c.advance();
    char closer = 0;
    if (kind == '#') {
      const size_t end = src.find("#}", c.i);
      if (end == std::string_view::npos) fail(tag_pos, "unclosed comment");
      closer = end > c.i && (src[end - 1] == '-' || src[end - 1] == '+') ? src[end - 1] : 0;
      c.advance(end + 2 - c.i);
    } else {
      out.push_back({kind == '{' ? Token::kVarBegin : Token::kBlockBegin, "", 0, 0, tag_pos});
      closer = lex_tag(c, kind == '{' ? "}}" : "%}", out);
      out.push_back({kind == '{' ? Token::kVarEnd : Token::kBlockEnd, "", 0, 0, c.pos});
    }
    line_starting = false;
    if (closer == '-') {
      strip_next = true;
    } else if (kind != '{' && closer != '+' && c.i < src.size() && src[c.i] == '\n') {
      c.advance();  // trim_blocks: the first newline after a block or comment goes
      line_starting = true;
    }
  }
  out.push_back({Token::kEof, "", 0, 0, c.pos});
  return out;
}

}  // namespace areal::jinja
