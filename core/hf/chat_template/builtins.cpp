// Filters, tests, methods, operators and globals with Python/Jinja2
// semantics, limited to what chat templates use; unknown names are errors.
#include "builtins.hpp"

#include <algorithm>
#include <cstdint>
#include <cmath>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <exception>

#include "core/plugin_host/error.hpp"
#include "core/hf/tokenizer/unicode.hpp"

namespace areal::jinja {

[[noreturn]] void runtime_error(Pos p, const std::string& what) {
  throw Error(AREAL_CODE_INVALID_ARGUMENT, "template:" + std::to_string(p.line) + ":" + std::to_string(p.col) + ": " + what);
}

std::u32string to_u32(const std::string& s) {
  std::vector<char32_t> cps;
  std::vector<uint32_t> offs;
  unicode::decode_utf8(s, cps, offs);
  return std::u32string(cps.begin(), cps.end());
}

std::string from_u32(const std::u32string& s) {
  std::string out;
  for (char32_t c : s) unicode::append_utf8(out, c);
  return out;
}

namespace {

bool py_space(char32_t c) { return unicode::is_white_space(c) || c == 0x1C || c == 0x1D || c == 0x1E || c == 0x1F; }

std::string strip(const std::string& s, const Value& chars, bool left, bool right) {
  const std::u32string u = to_u32(s);
  std::u32string set;
  const bool ws = chars.is_undefined() || chars.is_none();
  if (!ws) set = to_u32(chars.str());
  auto drop = [&](char32_t c) { return ws ? py_space(c) : set.find(c) != std::u32string::npos; };
  size_t b = 0, e = u.size();
  if (left)
    while (b < e && drop(u[b])) ++b;
  if (right)
    while (e > b && drop(u[e - 1])) --e;
  return from_u32(u.substr(b, e - b));
}

Array split(const std::string& s, const Value& sep, int64_t maxsplit) {
  Array out;
  if (sep.is_undefined() || sep.is_none()) {  // runs of white space, ends trimmed
    const std::u32string u = to_u32(s);
    size_t i = 0;
    while (i < u.size()) {
      while (i < u.size() && py_space(u[i])) ++i;
      if (i >= u.size()) break;
      if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
        size_t e = u.size();
        while (e > i && py_space(u[e - 1])) --e;
        out.push_back(Value(from_u32(u.substr(i, e - i))));
        return out;
      }
      size_t j = i;
      while (j < u.size() && !py_space(u[j])) ++j;
      out.push_back(Value(from_u32(u.substr(i, j - i))));
      i = j;
    }
    return out;
  }
  const std::string d = sep.str();
  if (d.empty()) throw Error(AREAL_CODE_INVALID_ARGUMENT, "empty separator");
  size_t pos = 0;
  while (true) {
    if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) break;
    const size_t hit = s.find(d, pos);
    if (hit == std::string::npos) break;
    out.push_back(Value(s.substr(pos, hit - pos)));
    pos = hit + d.size();
  }
  out.push_back(Value(s.substr(pos)));
  return out;
}

std::string replace_all(const std::string& s, const std::string& from, const std::string& to, int64_t count) {
  if (from.empty()) {  // Python inserts `to` between every character
    const std::u32string u = to_u32(s);
    std::string out = to;
    int64_t done = 1;
    for (char32_t c : u) {
      unicode::append_utf8(out, c);
      if (count < 0 || done < count) out += to, ++done;
    }
    return out;
  }
  std::string out;
  size_t pos = 0;
  int64_t done = 0;
  for (size_t hit; (count < 0 || done < count) && (hit = s.find(from, pos)) != std::string::npos; pos = hit + from.size(), ++done)
    out.append(s, pos, hit - pos).append(to);
  return out.append(s, pos, std::string::npos);
}

std::string map_case(const std::string& s, bool upper) {
  std::string out;
  for (char32_t c : to_u32(s)) unicode::append_utf8(out, upper ? unicode::to_upper(c) : unicode::to_lower(c));
  return out;
}

Value kw(const Kwargs& kwargs, const std::string& name, const Array& args, size_t index, Value dflt = Value()) {
  if (index < args.size()) return args[index];
  for (const auto& [k, v] : kwargs)
    if (k == name) return v;
  return dflt;
}

int64_t to_index(const Value& v, Pos p) {
  if (v.is_int()) return v.as_int();
  if (v.is_bool()) return v.as_bool() ? 1 : 0;
  runtime_error(p, "indices must be integers, not '" + v.type_name() + "'");
}

bool less(const Value& a, const Value& b, Pos p) {
  if (a.is_number() && b.is_number()) return a.as_double() < b.as_double();
  if ((a.is_number() || a.is_bool()) && (b.is_number() || b.is_bool()))
    return (a.is_bool() ? (a.as_bool() ? 1.0 : 0.0) : a.as_double()) < (b.is_bool() ? (b.as_bool() ? 1.0 : 0.0) : b.as_double());
  if (a.is_string() && b.is_string()) return to_u32(a.as_string()) < to_u32(b.as_string());
  runtime_error(p, "'<' not supported between instances of '" + a.type_name() + "' and '" + b.type_name() + "'");
}

Value method(const Value& obj, const std::string& name, Pos p) {
  if (obj.is_string()) {
    const std::string s = obj.as_string();
    auto fn = [](auto f) { return Value(Function(f)); };
    if (name == "strip" || name == "lstrip" || name == "rstrip") {
      const bool l = name != "rstrip", r = name != "lstrip";
      return fn([s, l, r](Array& a, Kwargs& k) { return Value(strip(s, kw(k, "chars", a, 0), l, r)); });
    }
    if (name == "split")
      return fn([s, p](Array& a, Kwargs& k) {
        const Value m = kw(k, "maxsplit", a, 1, Value(int64_t{-1}));
        return Value(split(s, kw(k, "sep", a, 0), to_index(m, p)));
      });
    if (name == "startswith" || name == "endswith") {
      const bool start = name == "startswith";
      return fn([s, start, p](Array& a, Kwargs& k) {
        const Value arg = kw(k, "prefix", a, 0);
        Array options = arg.is_array() ? arg.as_array() : Array{arg};
        for (const auto& o : options) {
          if (!o.is_string()) runtime_error(p, std::string(start ? "startswith" : "endswith") + " needs a string");
          const std::string& x = o.as_string();
          if (x.size() <= s.size() && (start ? s.compare(0, x.size(), x) == 0 : s.compare(s.size() - x.size(), x.size(), x) == 0))
            return Value(true);
        }
        return Value(false);
      });
    }
    if (name == "upper" || name == "lower") {
      const bool up = name == "upper";
      return fn([s, up](Array&, Kwargs&) { return Value(map_case(s, up)); });
    }
    if (name == "title" || name == "capitalize") {
      const bool title = name == "title";
      return fn([s, title](Array&, Kwargs&) {
        std::string out;
        bool start = true;
        for (char32_t c : to_u32(s)) {
          const bool cased = unicode::is_letter(c);
          unicode::append_utf8(out, start && cased ? unicode::to_upper(c) : unicode::to_lower(c));
          start = title ? !cased : false;
        }
        return Value(out);
      });
    }
    if (name == "replace")
      return fn([s, p](Array& a, Kwargs& k) {
        if (a.size() < 2) runtime_error(p, "replace() takes at least 2 arguments");
        return Value(replace_all(s, a[0].str(), a[1].str(), to_index(kw(k, "count", a, 2, Value(int64_t{-1})), p)));
      });
    if (name == "find" || name == "count")
      return fn([s, name](Array& a, Kwargs&) {
        const std::string x = a.empty() ? "" : a[0].str();
        if (name == "find") {
          const size_t at = s.find(x);
          return Value(at == std::string::npos ? int64_t{-1} : static_cast<int64_t>(to_u32(s.substr(0, at)).size()));
        }
        int64_t n = 0;
        if (x.empty()) return Value(static_cast<int64_t>(to_u32(s).size()) + 1);
        for (size_t at = s.find(x); at != std::string::npos; at = s.find(x, at + x.size())) ++n;
        return Value(n);
      });
    if (name == "join")
      return fn([s, p](Array& a, Kwargs&) {
        std::string out;
        const Array items = a.empty() ? Array{} : iterate(a[0], p);
        for (size_t i = 0; i < items.size(); ++i) out += (i ? s : "") + items[i].str();
        return Value(out);
      });
    if (name == "isdigit" || name == "isalpha" || name == "isspace" || name == "isalnum")
      return fn([s, name](Array&, Kwargs&) {
        const std::u32string u = to_u32(s);
        if (u.empty()) return Value(false);
        for (char32_t c : u) {
          const bool ok = name == "isdigit" ? unicode::is_digit(c) : name == "isalpha" ? unicode::is_letter(c)
                        : name == "isspace" ? py_space(c) : (unicode::is_letter(c) || unicode::is_number(c));
          if (!ok) return Value(false);
        }
        return Value(true);
      });
    return Value();
  }
  if (obj.is_object()) {
    const Object& o = obj.as_object();
    if (name == "items")
      return Value(Function([obj](Array&, Kwargs&) {
        Array out;
        for (const auto& [k, v] : obj.as_object().items) out.push_back(Value(Array{Value(k), v}));
        return Value(out);
      }));
    if (name == "keys")
      return Value(Function([obj](Array&, Kwargs&) {
        Array out;
        for (const auto& kv : obj.as_object().items) out.push_back(Value(kv.first));
        return Value(out);
      }));
    if (name == "values")
      return Value(Function([obj](Array&, Kwargs&) {
        Array out;
        for (const auto& kv : obj.as_object().items) out.push_back(kv.second);
        return Value(out);
      }));
    if (name == "get")
      return Value(Function([obj](Array& a, Kwargs& k) {
        const Value key = kw(k, "key", a, 0);
        const Value* v = key.is_string() ? obj.as_object().find(key.as_string()) : nullptr;
        return v ? *v : kw(k, "default", a, 1, Value::none());
      }));
    (void)o;
  }
  return Value();
}

}  // namespace

Value get_attr(const Value& obj, const std::string& name, Pos p) {
  if (obj.is_object()) {
    // Jinja2 tries the attribute before the item: a dict's own methods win
    // over keys of the same name (JSON Schema's "items" among them).
    if (name == "items" || name == "keys" || name == "values" || name == "get") return method(obj, name, p);
    if (const Value* v = obj.as_object().find(name)) return *v;
    return method(obj, name, p);
  }
  if (obj.is_array() && !name.empty() && std::isdigit(static_cast<unsigned char>(name[0])))
    return get_item(obj, Value(static_cast<int64_t>(std::stoll(name))), p);
  return method(obj, name, p);
}

Value get_item(const Value& obj, const Value& key, Pos p) {
  if (obj.is_object()) {
    if (!key.is_string()) return Value();
    if (const Value* v = obj.as_object().find(key.as_string())) return *v;
    return Value();
  }
  if (obj.is_array()) {
    const Array& a = obj.as_array();
    int64_t i = to_index(key, p);
    if (i < 0) i += static_cast<int64_t>(a.size());
    if (i < 0 || i >= static_cast<int64_t>(a.size())) return Value();  // Jinja2: undefined, not an error
    return a[static_cast<size_t>(i)];
  }
  if (obj.is_string()) {
    const std::u32string u = to_u32(obj.as_string());
    int64_t i = to_index(key, p);
    if (i < 0) i += static_cast<int64_t>(u.size());
    if (i < 0 || i >= static_cast<int64_t>(u.size())) return Value();
    return Value(from_u32(u.substr(static_cast<size_t>(i), 1)));
  }
  if (key.is_string()) return get_attr(obj, key.as_string(), p);
  return Value();
}

Value slice(const Value& obj, const Value& lo, const Value& hi, const Value& step_v, Pos p) {
  const int64_t step = step_v.is_none() ? 1 : to_index(step_v, p);
  if (step == 0) runtime_error(p, "slice step cannot be zero");
  auto run = [&](int64_t n, auto&& take) {
    auto clamp = [&](const Value& v, int64_t dflt) {
      if (v.is_none()) return dflt;
      int64_t i = to_index(v, p);
      if (i < 0) i += n;
      if (step > 0) return std::clamp<int64_t>(i, 0, n);
      return std::clamp<int64_t>(i, -1, n - 1);
    };
    const int64_t start = clamp(lo, step > 0 ? 0 : n - 1), stop = clamp(hi, step > 0 ? n : -1);
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) take(static_cast<size_t>(i));
  };
  if (obj.is_array()) {
    const Array& a = obj.as_array();
    Array out;
    run(static_cast<int64_t>(a.size()), [&](size_t i) { out.push_back(a[i]); });
    return Value(out);
  }
  if (obj.is_string()) {
    const std::u32string u = to_u32(obj.as_string());
    std::u32string out;
    run(static_cast<int64_t>(u.size()), [&](size_t i) { out.push_back(u[i]); });
    return Value(from_u32(out));
  }
  runtime_error(p, "'" + obj.type_name() + "' object is not subscriptable");
}

Array iterate(const Value& v, Pos p) {
  switch (v.kind()) {
    case Value::Kind::kUndefined: return {};
    case Value::Kind::kArray: return v.as_array();
    case Value::Kind::kObject: {
      Array keys;
      for (const auto& kv : v.as_object().items) keys.push_back(Value(kv.first));
      return keys;
    }
    case Value::Kind::kString: {
      Array chars;
      for (char32_t c : to_u32(v.as_string())) chars.push_back(Value(from_u32(std::u32string(1, c))));
      return chars;
    }
    default: runtime_error(p, "'" + v.type_name() + "' object is not iterable");
  }
}

bool contains(const Value& container, const Value& item, Pos p) {
  if (container.is_string()) {
    if (!item.is_string()) runtime_error(p, "'in <string>' requires string as left operand, not " + item.type_name());
    return container.as_string().find(item.as_string()) != std::string::npos;
  }
  if (container.is_object()) return item.is_string() && container.as_object().find(item.as_string()) != nullptr;
  if (container.is_array()) {
    for (const auto& x : container.as_array())
      if (x.equals(item)) return true;
    return false;
  }
  if (container.is_undefined()) return false;
  runtime_error(p, "argument of type '" + container.type_name() + "' is not iterable");
}

Value binary_op(const std::string& op, const Value& a, const Value& b, Pos p) {
  if (op == "==") return Value(a.equals(b));
  if (op == "!=") return Value(!a.equals(b));
  if (op == "<") return Value(less(a, b, p));
  if (op == ">") return Value(less(b, a, p));
  if (op == "<=") return Value(!less(b, a, p));
  if (op == ">=") return Value(!less(a, b, p));
  if (op == "~") return Value(a.str() + b.str());
  if (a.is_undefined() || b.is_undefined()) runtime_error(p, "an undefined value is used with '" + op + "'");
  auto bad = [&]() -> Value {
    runtime_error(p, "unsupported operand type(s) for " + op + ": '" + a.type_name() + "' and '" + b.type_name() + "'");
  };
  const bool nums = (a.is_number() || a.is_bool()) && (b.is_number() || b.is_bool());
  const bool ints = (a.is_int() || a.is_bool()) && (b.is_int() || b.is_bool());
  auto iv = [](const Value& v) { return v.is_bool() ? int64_t{v.as_bool()} : v.as_int(); };
  auto dv = [](const Value& v) { return v.is_bool() ? (v.as_bool() ? 1.0 : 0.0) : v.as_double(); };
  // Checked 64-bit integer arithmetic: overflow is an error, as a wrapped value would be wrong.
  auto overflow = [&]() { runtime_error(p, "integer overflow in '" + op + "' (template integers are 64-bit)"); };
  int64_t r = 0;  // written by __builtin_*_overflow, read once the flag it returns is known
  auto checked = [&](bool overflowed) {
    if (overflowed) overflow();
    return Value(r);
  };
  if (op == "+") {
    if (a.is_string() && b.is_string()) {
      if (a.as_string().size() + b.as_string().size() > kMaxStringBytes) runtime_error(p, "string longer than 16 MiB");
      return Value(a.as_string() + b.as_string());
    }
    if (a.is_array() && b.is_array()) {
      Array out = a.as_array();
      out.insert(out.end(), b.as_array().begin(), b.as_array().end());
      return Value(out);
    }
    if (ints) return checked(__builtin_add_overflow(iv(a), iv(b), &r));
    if (nums) return Value(dv(a) + dv(b));
    return bad();
  }
  if (op == "-") return ints ? checked(__builtin_sub_overflow(iv(a), iv(b), &r)) : nums ? Value(dv(a) - dv(b)) : bad();
  if (op == "*") {
    if (ints) return checked(__builtin_mul_overflow(iv(a), iv(b), &r));
    if (nums) return Value(dv(a) * dv(b));
    const Value* s = a.is_string() ? &a : b.is_string() ? &b : nullptr;
    const Value* n = a.is_int() ? &a : b.is_int() ? &b : nullptr;
    if (s && n) {
      const int64_t times = std::max<int64_t>(0, n->as_int());
      if (!s->as_string().empty() && static_cast<uint64_t>(times) > kMaxStringBytes / s->as_string().size())
        runtime_error(p, "string longer than 16 MiB");
      std::string out;
      out.reserve(s->as_string().size() * static_cast<size_t>(times));
      for (int64_t k = 0; k < times; ++k) out += s->as_string();
      return Value(out);
    }
    return bad();
  }
  if (op == "/") {
    if (!nums) return bad();
    if (dv(b) == 0) runtime_error(p, "division by zero");
    return Value(dv(a) / dv(b));
  }
  if (op == "//" || op == "%") {
    if (!nums) return bad();
    if (dv(b) == 0) runtime_error(p, "integer division or modulo by zero");
    if (ints) {
      const int64_t x = iv(a), y = iv(b);
      if (x == INT64_MIN && y == -1) overflow();
      int64_t q = x / y, m = x % y;
      if (m != 0 && ((m < 0) != (y < 0))) --q, m += y;  // Python floors
      return op == "//" ? Value(q) : Value(m);
    }
    const double q = std::floor(dv(a) / dv(b));
    return op == "//" ? Value(q) : Value(dv(a) - q * dv(b));
  }
  if (op == "**") {
    if (ints && iv(b) >= 0) {  // by squaring: 64 steps at most, each checked
      int64_t result = 1, base = iv(a), e = iv(b);
      while (e > 0) {
        if ((e & 1) && __builtin_mul_overflow(result, base, &result)) overflow();
        e >>= 1;
        if (e > 0 && __builtin_mul_overflow(base, base, &base)) overflow();
      }
      return Value(result);
    }
    return nums ? Value(std::pow(dv(a), dv(b))) : bad();
  }
  runtime_error(p, "unknown operator " + op);
}

bool apply_test(const std::string& name, const Value& v, Array& args, Pos p) {
  auto arg = [&](size_t i) -> const Value& {
    if (i >= args.size()) runtime_error(p, "test '" + name + "' needs an argument");
    return args[i];
  };
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "boolean") return v.is_bool();
  if (name == "true") return v.is_bool() && v.as_bool();
  if (name == "false") return v.is_bool() && !v.as_bool();
  if (name == "string") return v.is_string();
  if (name == "number") return v.is_number();
  if (name == "integer") return v.is_int();
  if (name == "float") return v.is_float();
  if (name == "mapping") return v.is_object();
  if (name == "iterable") return v.is_array() || v.is_object() || v.is_string() || v.is_undefined();
  if (name == "sequence") return v.is_array() || v.is_object() || v.is_string();
  if (name == "callable") return v.is_function();
  if (name == "equalto" || name == "eq" || name == "==" || name == "sameas") return v.equals(arg(0));
  if (name == "ne" || name == "!=") return !v.equals(arg(0));
  if (name == "lt" || name == "lessthan") return less(v, arg(0), p);
  if (name == "gt" || name == "greaterthan") return less(arg(0), v, p);
  if (name == "le") return !less(arg(0), v, p);
  if (name == "ge") return !less(v, arg(0), p);
  if (name == "in") return contains(arg(0), v, p);
  if (name == "odd" || name == "even" || name == "divisibleby") {
    if (!v.is_int()) runtime_error(p, "test '" + name + "' needs an integer");
    if (name == "divisibleby") return arg(0).is_int() && arg(0).as_int() != 0 && v.as_int() % arg(0).as_int() == 0;
    return (v.as_int() % 2 != 0) == (name == "odd");
  }
  if (name == "lower" || name == "upper") return v.is_string() && map_case(v.as_string(), name == "upper") == v.as_string();
  runtime_error(p, "unknown test '" + name + "'");
}

Value apply_filter(const std::string& name, Value& v, Array& args, Kwargs& kwargs, Pos p) {
  auto arg = [&](const char* key, size_t i, Value dflt = Value()) { return kw(kwargs, key, args, i, dflt); };
  if (name == "length" || name == "count") {
    if (v.is_string()) return Value(static_cast<int64_t>(to_u32(v.as_string()).size()));
    if (v.is_array()) return Value(static_cast<int64_t>(v.as_array().size()));
    if (v.is_object()) return Value(static_cast<int64_t>(v.as_object().items.size()));
    if (v.is_undefined()) return Value(int64_t{0});
    runtime_error(p, "object of type '" + v.type_name() + "' has no len()");
  }
  if (name == "tojson") {
    // transformers' tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False).
    if (v.is_undefined()) runtime_error(p, "tojson: the value is undefined");
    for (const auto& [k, _] : kwargs)
      if (k != "ensure_ascii" && k != "indent" && k != "separators" && k != "sort_keys")
        runtime_error(p, "tojson() got an unexpected keyword argument '" + k + "'");
    if (args.size() > 4) runtime_error(p, "tojson() takes at most 4 arguments");
    Value::JsonStyle style;
    style.ensure_ascii = arg("ensure_ascii", 0, Value(false)).truthy();
    const Value indent = arg("indent", 1, Value::none());
    if (indent.is_int()) style.indent = static_cast<int>(std::max<int64_t>(indent.as_int(), 0));
    else if (!indent.is_none() && !indent.is_undefined()) runtime_error(p, "tojson: indent must be an integer or None");
    const Value separators = arg("separators", 2, Value::none());
    if (separators.is_array()) {
      if (separators.as_array().size() != 2 || !separators.as_array()[0].is_string() || !separators.as_array()[1].is_string())
        runtime_error(p, "tojson: separators must be a pair of strings (item, key)");
      style.item_separator = separators.as_array()[0].as_string(), style.key_separator = separators.as_array()[1].as_string();
    } else if (!separators.is_none() && !separators.is_undefined()) {
      runtime_error(p, "tojson: separators must be a pair of strings (item, key)");
    }
    style.sort_keys = arg("sort_keys", 3, Value(false)).truthy();
    return Value(v.to_json(style));
  }
  if (name == "trim") return Value(strip(v.str(), arg("chars", 0), true, true));
  if (name == "upper" || name == "lower") return Value(map_case(v.str(), name == "upper"));
  if (name == "string") return Value(v.str());
  if (name == "safe" || name == "e" || name == "escape") {
    if (name == "safe") return v;
    std::string out;
    for (char c : v.str()) {
      switch (c) {
        case '&': out += "&amp;"; break;
        case '<': out += "&lt;"; break;
        case '>': out += "&gt;"; break;
        case '"': out += "&#34;"; break;
        case '\'': out += "&#39;"; break;
        default: out += c;
      }
    }
    return Value(out);
  }
  if (name == "default" || name == "d") {
    const bool boolean = arg("boolean", 1, Value(false)).truthy();
    if (v.is_undefined() || (boolean && !v.truthy())) return arg("default_value", 0, Value(std::string()));
    return v;
  }
  if (name == "first" || name == "last") {
    const Array items = iterate(v, p);
    if (items.empty()) return Value();
    return name == "first" ? items.front() : items.back();
  }
  if (name == "join") {
    const std::string sep = arg("d", 0, Value(std::string())).str();
    const Value attribute = arg("attribute", 1);
    std::string out;
    const Array items = iterate(v, p);
    for (size_t i = 0; i < items.size(); ++i)
      out += (i ? sep : "") + (attribute.is_undefined() ? items[i] : get_item(items[i], attribute, p)).str();
    return Value(out);
  }
  if (name == "replace") {
    if (args.size() < 2) runtime_error(p, "replace filter takes old and new");
    return Value(replace_all(v.str(), args[0].str(), args[1].str(), to_index(arg("count", 2, Value(int64_t{-1})), p)));
  }
  if (name == "int") {
    // Jinja2: int(s), else int(float(s)) ("42.23" is 42), else the default;
    // a prefix of digits ("12abc") is no number.
    if (v.is_int()) return v;
    if (v.is_float()) return Value(static_cast<int64_t>(v.as_double()));
    if (v.is_bool()) return Value(int64_t{v.as_bool()});
    const std::string text = strip(v.str(), Value(), true, true);
    std::string digits;  // Python allows one '_' between digits
    bool ok = !text.empty();
    for (size_t k = 0; k < text.size() && ok; ++k) {
      const char ch = text[k];
      if ((ch == '+' || ch == '-') && k == 0) digits += ch;
      else if (std::isdigit(static_cast<unsigned char>(ch))) digits += ch;
      else ok = ch == '_' && k > 0 && k + 1 < text.size() && std::isdigit(static_cast<unsigned char>(text[k - 1])) &&
                std::isdigit(static_cast<unsigned char>(text[k + 1]));
    }
    if (ok && !digits.empty() && std::isdigit(static_cast<unsigned char>(digits.back()))) {
      try {
        return Value(static_cast<int64_t>(std::stoll(digits)));
      } catch (const std::exception&) {
        runtime_error(p, "int: " + text + " is out of range");
      }
    }
    const bool hex_or_empty = text.empty() || text.find_first_of("xXpP") != std::string::npos;
    char* end = nullptr;
    const double d = hex_or_empty ? 0.0 : std::strtod(text.c_str(), &end);
    if (!hex_or_empty && end == text.c_str() + text.size() && std::isfinite(d) && std::fabs(d) < 9.2e18)
      return Value(static_cast<int64_t>(d));
    return arg("default", 0, Value(int64_t{0}));
  }
  if (name == "float") {
    if (v.is_number()) return Value(v.as_double());
    try {
      return Value(std::stod(v.str()));
    } catch (const std::exception&) {
      return arg("default", 0, Value(0.0));
    }
  }
  if (name == "abs") {
    if (v.is_int()) return Value(v.as_int() < 0 ? -v.as_int() : v.as_int());
    if (v.is_float()) return Value(std::fabs(v.as_double()));
    runtime_error(p, "abs needs a number");
  }
  if (name == "round") {
    if (!v.is_number()) runtime_error(p, "round needs a number");
    const int64_t precision = to_index(arg("precision", 0, Value(int64_t{0})), p);
    const std::string method_name = arg("method", 1, Value("common")).str();
    if (method_name != "common" && method_name != "floor" && method_name != "ceil")
      runtime_error(p, "method must be 'common', 'ceil' or 'floor'");
    if (method_name == "common") {
      // Python's round(): half to even on the double's exact value; an int stays an int.
      if (v.is_int() && precision >= 0) return v;
      if (precision >= 0 && precision <= 300) {
        const int digits = static_cast<int>(precision);
        std::string buf(static_cast<size_t>(std::snprintf(nullptr, 0, "%.*f", digits, v.as_double())) + 1, '\0');
        std::snprintf(buf.data(), buf.size(), "%.*f", digits, v.as_double());  // correctly rounded, ties to even
        const double r = std::strtod(buf.c_str(), nullptr);
        return v.is_int() ? Value(static_cast<int64_t>(r)) : Value(r);
      }
      const double scale = std::pow(10.0, static_cast<double>(-precision));
      const double r = std::nearbyint(v.as_double() / scale) * scale;
      return v.is_int() ? Value(static_cast<int64_t>(r)) : Value(r);
    }
    const double scale = std::pow(10.0, static_cast<double>(precision));
    const double x = v.as_double() * scale;
    return Value((method_name == "floor" ? std::floor(x) : std::ceil(x)) / scale);
  }
  if (name == "list") return Value(iterate(v, p));
  if (name == "items") {
    if (v.is_undefined()) return Value(Array{});
    if (!v.is_object()) runtime_error(p, "items filter needs a mapping");
    Array out;
    for (const auto& [k, x] : v.as_object().items) out.push_back(Value(Array{Value(k), x}));
    return Value(out);
  }
  if (name == "reverse") {
    if (v.is_string()) {
      std::u32string u = to_u32(v.as_string());
      std::reverse(u.begin(), u.end());
      return Value(from_u32(u));
    }
    Array items = iterate(v, p);
    std::reverse(items.begin(), items.end());
    return Value(items);
  }
  if (name == "sort" || name == "unique" || name == "min" || name == "max" || name == "sum") {
    // Jinja2: sort(reverse, case_sensitive, attribute), unique/min/max(case_sensitive,
    // attribute), sum(attribute, start); strings compare lower-cased unless case_sensitive.
    Array items = iterate(v, p);
    const Value attribute = arg("attribute", name == "sum" ? 0 : name == "sort" ? 2 : 1);
    const bool case_sensitive = name == "sum" || arg("case_sensitive", name == "sort" ? 1 : 0, Value(false)).truthy();
    auto key = [&](const Value& x) {
      Value k = attribute.is_undefined() ? x : get_item(x, attribute, p);
      return !case_sensitive && k.is_string() ? Value(map_case(k.as_string(), false)) : k;
    };
    if (name == "sum") {
      Value total = arg("start", 1, Value(int64_t{0}));
      for (const auto& x : items) total = binary_op("+", total, key(x), p);
      return total;
    }
    if (name == "unique") {
      Array out;
      for (const auto& x : items)
        if (std::none_of(out.begin(), out.end(), [&](const Value& y) { return key(y).equals(key(x)); })) out.push_back(x);
      return Value(out);
    }
    std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& b) { return less(key(a), key(b), p); });
    if (name == "sort") {
      if (arg("reverse", 0, Value(false)).truthy()) std::reverse(items.begin(), items.end());
      return Value(items);
    }
    if (items.empty()) return Value();
    return name == "min" ? items.front() : items.back();
  }
  if (name == "selectattr" || name == "rejectattr" || name == "select" || name == "reject") {
    const bool by_attr = name.size() > 6;
    const bool keep_match = name[0] == 's';
    Array out;
    for (const auto& x : iterate(v, p)) {
      const Value subject = by_attr ? get_item(x, args.empty() ? Value() : args[0], p) : x;
      const size_t test_at = by_attr ? 1 : 0;
      bool ok;
      if (args.size() <= test_at) {
        ok = subject.truthy();
      } else {
        Array test_args(args.begin() + static_cast<std::ptrdiff_t>(test_at) + 1, args.end());
        ok = apply_test(args[test_at].str(), subject, test_args, p);
      }
      if (ok == keep_match) out.push_back(x);
    }
    return Value(out);
  }
  if (name == "map") {
    Array out;
    const Value attribute = arg("attribute", 99);
    for (auto& x : iterate(v, p)) {
      if (!attribute.is_undefined()) {
        const Value got = get_item(x, attribute, p);
        out.push_back(got.is_undefined() ? arg("default", 99) : got);
      } else if (!args.empty()) {
        Array rest(args.begin() + 1, args.end());
        Kwargs none;
        Value item = x;
        out.push_back(apply_filter(args[0].str(), item, rest, none, p));
      } else {
        out.push_back(x);
      }
    }
    return Value(out);
  }
  if (name == "indent") {
    const Value width_v = arg("width", 0, Value(int64_t{4}));
    const std::string pad = width_v.is_string() ? width_v.as_string() : std::string(static_cast<size_t>(to_index(width_v, p)), ' ');
    const bool first = arg("first", 1, Value(false)).truthy(), blank = arg("blank", 2, Value(false)).truthy();
    Array lines = split(v.str(), Value("\n"), -1);
    std::string out;
    for (size_t i = 0; i < lines.size(); ++i) {
      const std::string& line = lines[i].as_string();
      if (i > 0) out += "\n";
      if ((i > 0 || first) && (blank || !line.empty())) out += pad;
      out += line;
    }
    return Value(out);
  }
  if (name == "wordcount") return Value(static_cast<int64_t>(split(v.str(), Value(), -1).size()));
  if (name == "title") {
    // Jinja2's filter (not str.title): words start after [-\s({[<] only, so
    // "tool_call" stays one word.
    std::string out;
    bool start = true;
    for (char32_t c : to_u32(v.str())) {
      const bool boundary = c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || py_space(c);
      unicode::append_utf8(out, boundary ? c : start ? unicode::to_upper(c) : unicode::to_lower(c));
      start = boundary;
    }
    return Value(out);
  }
  if (name == "capitalize") {
    Array none_args;
    Kwargs none_kw;
    return method(Value(v.str()), name, p).as_function()(none_args, none_kw);
  }
  if (name == "dictsort") {
    if (!v.is_object()) runtime_error(p, "dictsort needs a mapping");
    Array out;
    for (const auto& [k, x] : v.as_object().items) out.push_back(Value(Array{Value(k), x}));
    // dictsort(case_sensitive=False, by='key', reverse=False)
    const bool case_sensitive = arg("case_sensitive", 0, Value(false)).truthy();
    const std::string by = arg("by", 1, Value("key")).str();
    if (by != "key" && by != "value") runtime_error(p, "You can only sort by either 'key' or 'value'");
    const size_t at = by == "key" ? 0 : 1;
    auto key = [&](const Value& pair) {
      const Value& k = pair.as_array()[at];
      return !case_sensitive && k.is_string() ? Value(map_case(k.as_string(), false)) : k;
    };
    std::stable_sort(out.begin(), out.end(), [&](const Value& a, const Value& b) { return less(key(a), key(b), p); });
    if (arg("reverse", 2, Value(false)).truthy()) std::reverse(out.begin(), out.end());
    return Value(out);
  }
  runtime_error(p, "unknown filter '" + name + "'");
}

Object make_globals() {
  Object g;
  g.set("range", Value(Function([](Array& a, Kwargs&) {
    int64_t start = 0, stop = 0, step = 1;
    const Pos p;
    if (a.size() == 1) stop = to_index(a[0], p);
    else if (a.size() >= 2) start = to_index(a[0], p), stop = to_index(a[1], p);
    if (a.size() == 3) step = to_index(a[2], p);
    if (step == 0) throw Error(AREAL_CODE_INVALID_ARGUMENT, "range() step must not be zero");
    // The length first, in 128 bits: no step of the loop below can overflow.
    const __int128 span = static_cast<__int128>(stop) - start;
    const __int128 n = (span > 0) == (step > 0) && span != 0 ? (span + step + (step > 0 ? -1 : 1)) / step : 0;
    if (n > kMaxRangeItems) throw Error(AREAL_CODE_INVALID_ARGUMENT, "range() of more than 1000000 items");
    Array out;
    for (int64_t k = 0; k < static_cast<int64_t>(n); ++k) out.push_back(Value(static_cast<int64_t>(start + static_cast<__int128>(k) * step)));
    return Value(out);
  })));
  g.set("namespace", Value(Function([](Array& a, Kwargs& k) {
    Object ns;
    ns.is_namespace = true;
    for (const auto& x : a)
      if (x.is_object())
        for (const auto& [key, v] : x.as_object().items) ns.set(key, v);
    for (const auto& [key, v] : k) ns.set(key, v);
    return Value(ns);
  })));
  g.set("dict", Value(Function([](Array&, Kwargs& k) {
    Object o;
    for (const auto& [key, v] : k) o.set(key, v);
    return Value(o);
  })));
  g.set("raise_exception", Value(Function([](Array& a, Kwargs&) -> Value {
    throw Error(AREAL_CODE_INVALID_ARGUMENT, "chat template raised: " + (a.empty() ? std::string("error") : a[0].str()));
  })));
  g.set("strftime_now", Value(Function([](Array& a, Kwargs&) {
    const std::time_t now = std::time(nullptr);
    std::tm tm{};
    localtime_r(&now, &tm);
    char buf[256];
    const std::string fmt = a.empty() ? "%Y-%m-%d" : a[0].str();
    const size_t n = std::strftime(buf, sizeof buf, fmt.c_str(), &tm);
    return Value(std::string(buf, n));
  })));
  return g;
}

}  // namespace areal::jinja
