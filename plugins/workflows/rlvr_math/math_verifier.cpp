#include "math_verifier.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <vector>
#include <utility>
#include <string>

namespace areal::workflows {

namespace {

std::string trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// The content of the last \boxed{...}, braces balanced.
std::optional<std::string> last_boxed(std::string_view s) {
  const size_t at = s.rfind("\\boxed{");
  if (at == std::string_view::npos) return std::nullopt;
  int depth = 0;
  const size_t start = at + 7;
  for (size_t i = start; i < s.size(); ++i) {
    if (s[i] == '{') ++depth;
    else if (s[i] == '}') {
      if (depth == 0) return std::string(s.substr(start, i - start));
      --depth;
    }
  }
  return std::nullopt;
}

// The last number-looking token: optional sign (ASCII or U+2212), digits
// with , or . inside, optional /denominator.
std::optional<std::string> last_number(std::string_view s) {
  static const std::string_view kMinus = "\xE2\x88\x92";
  std::optional<std::string> found;
  for (size_t i = 0; i < s.size();) {
    const bool unicode_minus = s.substr(i, 3) == kMinus && i + 3 < s.size() && std::isdigit(static_cast<unsigned char>(s[i + 3]));
    const bool sign = unicode_minus || ((s[i] == '-' || s[i] == '+') && i + 1 < s.size() && std::isdigit(static_cast<unsigned char>(s[i + 1])));
    if (!sign && !std::isdigit(static_cast<unsigned char>(s[i]))) {
      ++i;
      continue;
    }
    size_t j = i + (unicode_minus ? 3 : sign ? 1 : 0);
    while (j < s.size() && (std::isdigit(static_cast<unsigned char>(s[j])) ||
                            ((s[j] == ',' || s[j] == '.' || s[j] == '/') && j + 1 < s.size() && std::isdigit(static_cast<unsigned char>(s[j + 1])))))
      ++j;
    found = (unicode_minus ? std::string("-") : std::string()) + std::string(s.substr(i + (unicode_minus ? 3 : 0), j - i - (unicode_minus ? 3 : 0)));
    i = j;
  }
  return found;
}

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) s.replace(at, from.size(), to);
}

// The braced group at s[at] ('{' ... matching '}'): its content and the
// index after it; nullopt when unbalanced.
std::optional<std::pair<std::string, size_t>> group_at(const std::string& s, size_t at) {
  if (at >= s.size() || s[at] != '{') return std::nullopt;
  int depth = 0;
  for (size_t i = at; i < s.size(); ++i) {
    if (s[i] == '{') ++depth;
    else if (s[i] == '}' && --depth == 0) return std::make_pair(s.substr(at + 1, i - at - 1), i + 1);
  }
  return std::nullopt;
}

// An answer as the models write it in LaTeX, reduced to plain text: math
// delimiters, spacing commands, \$ and \%, degrees, \text{...} units after a
// value, \frac (and \dfrac, \tfrac) as a/b, a leading "x =", U+2212.
std::string plain_answer(std::string_view text) {
  std::string t = trim(text);
  replace_all(t, "\xE2\x88\x92", "-");
  for (const char* cmd : {"\\left", "\\right", "\\!", "\\,", "\\;", "\\:", "\\ ", "\\displaystyle"}) replace_all(t, cmd, "");
  for (const char* deg : {"^{\\circ}", "^\\circ", "\xC2\xB0"}) replace_all(t, deg, "");
  replace_all(t, "\\$", "$");
  replace_all(t, "\\%", "%");
  replace_all(t, "\\dfrac", "\\frac");
  replace_all(t, "\\tfrac", "\\frac");
  // \text{...} / \mbox{...} / \mathrm{...}: a unit after a value goes; alone it is its text.
  for (const char* cmd : {"\\text", "\\mbox", "\\mathrm", "\\textbf"}) {
    for (size_t at = t.find(cmd); at != std::string::npos; at = t.find(cmd, at)) {
      const auto g = group_at(t, at + std::string_view(cmd).size());
      if (!g) break;
      const bool after_value = trim(t.substr(0, at)).size() > 0;
      t.replace(at, g->second - at, after_value ? "" : g->first);
    }
  }
  // \frac{a}{b} and \frac ab
  for (size_t at = t.find("\\frac"); at != std::string::npos; at = t.find("\\frac")) {
    size_t i = at + 5;
    std::string num, den;
    if (auto g = group_at(t, i)) num = g->first, i = g->second;
    else if (i < t.size()) num = std::string(1, t[i]), ++i;
    if (auto g = group_at(t, i)) den = g->first, i = g->second;
    else if (i < t.size()) den = std::string(1, t[i]), ++i;
    if (num.empty() || den.empty()) break;
    t.replace(at, i - at, num + "/" + den);
  }
  // Math delimiters around the whole answer.
  t = trim(t);
  for (const auto& [open, close] : std::vector<std::pair<std::string, std::string>>{{"$", "$"}, {"\\(", "\\)"}, {"\\[", "\\]"}})
    if (t.size() >= open.size() + close.size() && t.compare(0, open.size(), open) == 0 && t.compare(t.size() - close.size(), close.size(), close) == 0)
      t = trim(t.substr(open.size(), t.size() - open.size() - close.size()));
  // "x = 5": the value (one variable name, then '=').
  if (const size_t eq = t.find('='); eq != std::string::npos && eq > 0 && t.find('=', eq + 1) == std::string::npos) {
    const std::string lhs = trim(t.substr(0, eq));
    if (!lhs.empty() && lhs.size() <= 2 && std::isalpha(static_cast<unsigned char>(lhs[0]))) t = trim(t.substr(eq + 1));
  }
  return t;
}

}  // namespace

std::optional<std::string> extract_final_answer(std::string_view reply) {
  if (auto b = last_boxed(reply)) return trim(*b);
  const std::string low = lower(std::string(reply));
  const size_t at = low.rfind("answer:");
  if (at != std::string::npos) {
    std::string rest = trim(reply.substr(at + 7));
    const size_t nl = rest.find('\n');
    if (nl != std::string::npos) rest = trim(rest.substr(0, nl));
    // Markdown around the label ("**Answer:** 42").
    while (!rest.empty() && (rest.front() == '*' || rest.front() == '_')) rest = trim(rest.substr(1));
    while (!rest.empty() && (rest.back() == '*' || rest.back() == '_')) rest = trim(rest.substr(0, rest.size() - 1));
    if (!rest.empty()) return rest;
  }
  return last_number(reply);
}

std::optional<double> parse_number(std::string_view text) {
  std::string t = plain_answer(text);
  if (!t.empty() && t.front() == '$') t = trim(t.substr(1));
  while (!t.empty() && (t.back() == '.' || t.back() == '%' || t.back() == '$')) t.pop_back();
  t = trim(t);
  if (!t.empty() && t.front() == '-' && t.size() > 1 && t[1] == '$') t.erase(1, 1);  // -$5
  // Commas group thousands (1,234,567); a comma anywhere else (1,2: a list,
  // or a decimal comma) makes it no number.
  for (size_t c = t.find(','); c != std::string::npos; c = t.find(',', c + 1)) {
    size_t digits_after = 0;
    while (c + 1 + digits_after < t.size() && std::isdigit(static_cast<unsigned char>(t[c + 1 + digits_after]))) ++digits_after;
    if (c == 0 || !std::isdigit(static_cast<unsigned char>(t[c - 1])) || digits_after != 3) return std::nullopt;
  }
  t.erase(std::remove(t.begin(), t.end(), ','), t.end());
  if (t.empty()) return std::nullopt;
  // a/b, parenthesised parts allowed ((1)/(2) from \frac); one slash at most.
  const size_t slash = t.find('/');
  auto plain = [](std::string x) -> std::optional<double> {
    x = trim(x);
    if (x.size() >= 2 && x.front() == '(' && x.back() == ')') x = trim(x.substr(1, x.size() - 2));
    if (x.empty()) return std::nullopt;
    char* end = nullptr;
    const double v = std::strtod(x.c_str(), &end);
    if (end != x.c_str() + x.size() || !std::isfinite(v) || x.find_first_of("xXpPnN") != std::string::npos) return std::nullopt;  // no hex, inf, nan
    return v;
  };
  if (slash != std::string::npos) {
    if (t.find('/', slash + 1) != std::string::npos) return std::nullopt;
    const auto num = plain(t.substr(0, slash)), den = plain(t.substr(slash + 1));
    if (!num || !den || *den == 0) return std::nullopt;
    return *num / *den;
  }
  return plain(t);
}

bool answers_match(std::string_view given, std::string_view reference) {
  const auto a = parse_number(given), b = parse_number(reference);
  if (a && b) return std::fabs(*a - *b) <= 1e-6 * std::max(1.0, std::fabs(*b));
  return lower(plain_answer(given)) == lower(plain_answer(reference));
}

}  // namespace areal::workflows
