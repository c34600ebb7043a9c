#include "core/hf/chat_template/value.hpp"

#include "core/hf/chat_template/builtins.hpp"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <algorithm>
#include <cstdlib>
#include <vector>

namespace areal::jinja {

const Value* Object::find(const std::string& key) const {
  for (const auto& kv : items)
    if (kv.first == key) return &kv.second;
  return nullptr;
}

void Object::set(const std::string& key, Value v) {
  for (auto& kv : items)
    if (kv.first == key) {
      kv.second = std::move(v);
      return;
    }
  items.emplace_back(key, std::move(v));
}

Value Value::none() {
  Value v;
  v.kind_ = Kind::kNone;
  return v;
}
Value::Value(bool b) : kind_(Kind::kBool), b_(b) {}
Value::Value(int64_t v) : kind_(Kind::kInt), i_(v) {}
Value::Value(double v) : kind_(Kind::kFloat), d_(v) {}
Value::Value(std::string s) : kind_(Kind::kString), s_(std::make_shared<std::string>(std::move(s))) {}
Value::Value(Array a) : kind_(Kind::kArray), a_(std::make_shared<Array>(std::move(a))) {}
Value::Value(Object o) : kind_(Kind::kObject), o_(std::make_shared<Object>(std::move(o))) {}
Value::Value(Function f) : kind_(Kind::kFunction), f_(std::make_shared<Function>(std::move(f))) {}

Value Value::from_json(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return none();
    case nlohmann::ordered_json::value_t::boolean: return Value(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer: return Value(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      const uint64_t u = j.get<uint64_t>();
      return u <= static_cast<uint64_t>(INT64_MAX) ? Value(static_cast<int64_t>(u)) : Value(static_cast<double>(u));
    }
    case nlohmann::ordered_json::value_t::number_float: return Value(j.get<double>());
    case nlohmann::ordered_json::value_t::string: return Value(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      Array a;
      a.reserve(j.size());
      for (const auto& x : j) a.push_back(from_json(x));
      return Value(std::move(a));
    }
    case nlohmann::ordered_json::value_t::object: {
      Object o;
      for (const auto& [k, x] : j.items()) o.items.emplace_back(k, from_json(x));
      return Value(std::move(o));
    }
    default: return Value();
  }
}

bool Value::truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone: return false;
    case Kind::kBool: return b_;
    case Kind::kInt: return i_ != 0;
    case Kind::kFloat: return d_ != 0.0;
    case Kind::kString: return !s_->empty();
    case Kind::kArray: return !a_->empty();
    case Kind::kObject: return !o_->items.empty();
    case Kind::kFunction: return true;
  }
  return false;
}

std::string format_float(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  if (d == 0) return std::signbit(d) ? "-0.0" : "0.0";
  // Shortest digits that round-trip (what Python's repr uses).
  char buf[40];
  for (int prec = 0; prec <= 16; ++prec) {
    std::snprintf(buf, sizeof buf, "%.*e", prec, d);
    if (std::strtod(buf, nullptr) == d) break;
  }
  const std::string e_form(buf);  // "-1.2345e+05"
  const bool negative = e_form[0] == '-';
  const size_t e_at = e_form.find('e');
  std::string digits;
  for (size_t i = negative ? 1 : 0; i < e_at; ++i)
    if (e_form[i] != '.') digits.push_back(e_form[i]);
  const int exponent = std::stoi(e_form.substr(e_at + 1));
  std::string out = negative ? "-" : "";
  if (exponent >= -4 && exponent < 16) {  // Python prints these in fixed notation
    if (exponent >= 0) {
      std::string int_part = digits.substr(0, std::min<size_t>(digits.size(), exponent + 1));
      int_part.append(static_cast<size_t>(exponent + 1) - int_part.size(), '0');
      const std::string frac = digits.size() > static_cast<size_t>(exponent + 1) ? digits.substr(exponent + 1) : "0";
      return out + int_part + "." + frac;
    }
    return out + "0." + std::string(static_cast<size_t>(-exponent - 1), '0') + digits;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) out += "." + digits.substr(1);
  char eb[16];
  std::snprintf(eb, sizeof eb, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
  return out + eb;
}

namespace {

std::string py_quote(const std::string& s) {
  // Python repr of str: single quotes unless the text has ' and no ".
  const bool has_single = s.find('\'') != std::string::npos, has_double = s.find('"') != std::string::npos;
  const char q = has_single && !has_double ? '"' : '\'';
  std::string out(1, q);
  for (unsigned char c : s) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c == static_cast<unsigned char>(q)) {
          out += '\\';
          out += static_cast<char>(c);
        } else if (c < 0x20 || c == 0x7F) {
          char b[8];
          std::snprintf(b, sizeof b, "\\x%02x", c);
          out += b;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + q;
}

// Python's json string: ensure_ascii writes every non-ASCII code point as
// \uXXXX (a surrogate pair past the BMP).
void json_string(const std::string& s, bool ensure_ascii, std::string& out) {
  const std::string quoted = nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (!ensure_ascii) {
    out += quoted;
    return;
  }
  for (char32_t c : to_u32(quoted)) {
    if (c < 0x80) {
      out += static_cast<char>(c);
      continue;
    }
    auto hex = [&](uint32_t u) {
      char b[8];
      std::snprintf(b, sizeof b, "\\u%04x", u);
      out += b;
    };
    if (c < 0x10000) {
      hex(c);
    } else {
      const uint32_t v = static_cast<uint32_t>(c) - 0x10000;
      hex(0xD800 + (v >> 10)), hex(0xDC00 + (v & 0x3FF));
    }
  }
}

void to_json_impl(const Value& v, const Value::JsonStyle& st, int depth, std::string& out) {
  const int indent = st.indent;
  const std::string nl = indent >= 0 ? "\n" + std::string(static_cast<size_t>(indent) * (depth + 1), ' ') : "";
  const std::string close_nl = indent >= 0 ? "\n" + std::string(static_cast<size_t>(indent) * depth, ' ') : "";
  const std::string& sep = st.item_separator;
  switch (v.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone: out += "null"; return;
    case Value::Kind::kBool: out += v.as_bool() ? "true" : "false"; return;
    case Value::Kind::kInt: out += std::to_string(v.as_int()); return;
    case Value::Kind::kFloat: {
      const double d = v.as_double();
      out += std::isnan(d) ? "NaN" : std::isinf(d) ? (d > 0 ? "Infinity" : "-Infinity") : format_float(d);
      return;
    }
    case Value::Kind::kString: json_string(v.as_string(), st.ensure_ascii, out); return;
    case Value::Kind::kArray: {
      const auto& a = v.as_array();
      if (a.empty()) {
        out += "[]";
        return;
      }
      out += "[";
      for (size_t i = 0; i < a.size(); ++i) {
        out += (i ? sep : "") + nl;
        to_json_impl(a[i], st, depth + 1, out);
      }
      out += close_nl + "]";
      return;
    }
    case Value::Kind::kObject: {
      const auto& items = v.as_object().items;
      if (items.empty()) {
        out += "{}";
        return;
      }
      std::vector<size_t> order(items.size());
      for (size_t i = 0; i < order.size(); ++i) order[i] = i;
      // UTF-8 byte order is code point order, which is Python's str order.
      if (st.sort_keys) std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return items[a].first < items[b].first; });
      out += "{";
      for (size_t i = 0; i < order.size(); ++i) {
        out += (i ? sep : "") + nl;
        json_string(items[order[i]].first, st.ensure_ascii, out);
        out += st.key_separator;
        to_json_impl(items[order[i]].second, st, depth + 1, out);
      }
      out += close_nl + "}";
      return;
    }
    case Value::Kind::kFunction: out += "null"; return;
  }
}

}  // namespace

std::string Value::str() const {
  switch (kind_) {
    case Kind::kUndefined: return "";
    case Kind::kString: return *s_;
    default: return repr();
  }
}

std::string Value::repr() const {
  switch (kind_) {
    case Kind::kUndefined: return "";
    case Kind::kNone: return "None";
    case Kind::kBool: return b_ ? "True" : "False";
    case Kind::kInt: return std::to_string(i_);
    case Kind::kFloat: return format_float(d_);
    case Kind::kString: return py_quote(*s_);
    case Kind::kArray: {
      std::string out = "[";
      for (size_t i = 0; i < a_->size(); ++i) out += (i ? ", " : "") + (*a_)[i].repr();
      return out + "]";
    }
    case Kind::kObject: {
      std::string out = "{";
      for (size_t i = 0; i < o_->items.size(); ++i)
        out += (i ? ", " : "") + py_quote(o_->items[i].first) + ": " + o_->items[i].second.repr();
      return out + "}";
    }
    case Kind::kFunction: return "<function>";
  }
  return "";
}

std::string Value::to_json(const JsonStyle& style) const {
  JsonStyle st = style;
  if (st.item_separator.empty()) st.item_separator = st.indent >= 0 ? "," : ", ";
  std::string out;
  to_json_impl(*this, st, 0, out);
  return out;
}

std::string Value::to_json(int indent) const {
  JsonStyle st;
  st.indent = indent;
  return to_json(st);
}

std::string Value::type_name() const {
  switch (kind_) {
    case Kind::kUndefined: return "Undefined";
    case Kind::kNone: return "NoneType";
    case Kind::kBool: return "bool";
    case Kind::kInt: return "int";
    case Kind::kFloat: return "float";
    case Kind::kString: return "str";
    case Kind::kArray: return "list";
    case Kind::kObject: return o_->is_namespace ? "Namespace" : "dict";
    case Kind::kFunction: return "function";
  }
  return "?";
}

bool Value::equals(const Value& o) const {
  if (is_number() && o.is_number()) {
    if (is_int() && o.is_int()) return i_ == o.i_;
    return as_double() == o.as_double();
  }
  if (is_bool() && o.is_number()) return (b_ ? 1.0 : 0.0) == o.as_double();  // Python: True == 1
  if (is_number() && o.is_bool()) return o.equals(*this);
  if (kind_ != o.kind_) return false;
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone: return true;
    case Kind::kBool: return b_ == o.b_;
    case Kind::kString: return *s_ == *o.s_;
    case Kind::kArray: {
      if (a_->size() != o.a_->size()) return false;
      for (size_t i = 0; i < a_->size(); ++i)
        if (!(*a_)[i].equals((*o.a_)[i])) return false;
      return true;
    }
    case Kind::kObject: {
      if (o_->items.size() != o.o_->items.size()) return false;
      for (const auto& [k, v] : o_->items) {
        const Value* other = o.o_->find(k);
        if (other == nullptr || !v.equals(*other)) return false;
      }
      return true;
    }
    case Kind::kFunction: return f_ == o.f_;
    default: return false;
  }
}

}  // namespace areal::jinja
