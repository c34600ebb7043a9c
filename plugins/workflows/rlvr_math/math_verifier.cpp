#include "math_verifier.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>

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

// The last number-looking token: optional sign, digits with , or . inside, optional /denominator.
std::optional<std::string> last_number(std::string_view s) {
  std::optional<std::string> found;
  for (size_t i = 0; i < s.size();) {
    const bool sign = (s[i] == '-' || s[i] == '+') && i + 1 < s.size() && std::isdigit(static_cast<unsigned char>(s[i + 1]));
    if (!sign && !std::isdigit(static_cast<unsigned char>(s[i]))) {
      ++i;
      continue;
    }
    size_t j = i + (sign ? 1 : 0);
    while (j < s.size() && (std::isdigit(static_cast<unsigned char>(s[j])) ||
                            ((s[j] == ',' || s[j] == '.' || s[j] == '/') && j + 1 < s.size() && std::isdigit(static_cast<unsigned char>(s[j + 1])))))
      ++j;
    found = std::string(s.substr(i, j - i));
    i = j;
  }
  return found;
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
    if (!rest.empty()) return rest;
  }
  return last_number(reply);
}

std::optional<double> parse_number(std::string_view text) {
  std::string t = trim(text);
  if (!t.empty() && t.front() == '$') t.erase(0, 1);
  while (!t.empty() && (t.back() == '.' || t.back() == '%')) t.pop_back();
  t.erase(std::remove(t.begin(), t.end(), ','), t.end());
  if (t.empty()) return std::nullopt;
  const size_t slash = t.find('/');
  if (slash != std::string::npos) {
    const auto num = parse_number(t.substr(0, slash)), den = parse_number(t.substr(slash + 1));
    if (!num || !den || *den == 0) return std::nullopt;
    return *num / *den;
  }
  char* end = nullptr;
  const double v = std::strtod(t.c_str(), &end);
  if (end != t.c_str() + t.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

bool answers_match(std::string_view given, std::string_view reference) {
  const auto a = parse_number(given), b = parse_number(reference);
  if (a && b) return std::fabs(*a - *b) <= 1e-6 * std::max(1.0, std::fabs(*b));
  return lower(trim(given)) == lower(trim(reference));
}

}  // namespace areal::workflows
