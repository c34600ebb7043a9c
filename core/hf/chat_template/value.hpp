// Values of the Jinja engine, with Python semantics (what transformers'
// Jinja2 does): ints and floats stay distinct, dicts keep insertion order,
// lists and dicts are shared by reference, str() and repr() print as Python.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace areal::jinja {

class Value;
using Array = std::vector<Value>;
using Kwargs = std::vector<std::pair<std::string, Value>>;

// Insertion-ordered dict. Small in practice (messages, tool schemas), so a
// vector with linear lookup beats a hash map.
struct Object {
  std::vector<std::pair<std::string, Value>> items;
  bool is_namespace = false;  // namespace(): attributes may be assigned
  const Value* find(const std::string& key) const;
  void set(const std::string& key, Value v);
};

// A callable: macros, globals (range, namespace, ...), bound methods.
using Function = std::function<Value(Array& args, Kwargs& kwargs)>;

class Value {
 public:
  enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kArray, kObject, kFunction };

  Value() = default;  // undefined
  static Value none();
  Value(bool b);
  Value(int v) : Value(static_cast<int64_t>(v)) {}
  Value(int64_t v);
  Value(double v);
  Value(std::string s);
  Value(const char* s) : Value(std::string(s)) {}
  Value(Array a);
  Value(Object o);
  Value(Function f);
  static Value from_json(const nlohmann::ordered_json& j);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_int() const { return kind_ == Kind::kInt; }
  bool is_float() const { return kind_ == Kind::kFloat; }
  bool is_number() const { return kind_ == Kind::kInt || kind_ == Kind::kFloat; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_array() const { return kind_ == Kind::kArray; }
  bool is_object() const { return kind_ == Kind::kObject; }
  bool is_function() const { return kind_ == Kind::kFunction; }

  bool as_bool() const { return b_; }
  int64_t as_int() const { return i_; }
  double as_double() const { return kind_ == Kind::kInt ? static_cast<double>(i_) : d_; }
  const std::string& as_string() const { return *s_; }
  Array& as_array() const { return *a_; }
  Object& as_object() const { return *o_; }
  const Function& as_function() const { return *f_; }

  bool truthy() const;
  // Python str() (what {{ x }} prints) and repr() (inside containers).
  std::string str() const;
  std::string repr() const;
  // Python json.dumps(x, ensure_ascii=..., indent=..., separators=...,
  // sort_keys=...) as transformers' tojson calls it.
  struct JsonStyle {
    int indent = -1;  // None
    std::string item_separator, key_separator = ": ";  // item: ", " without indent, "," with it, unless given
    bool sort_keys = false, ensure_ascii = false;
  };
  std::string to_json(const JsonStyle& style) const;
  std::string to_json(int indent = -1) const;
  std::string type_name() const;  // Python's: 'str', 'int', 'dict', 'NoneType', ...

  bool equals(const Value& o) const;

 private:
  Kind kind_ = Kind::kUndefined;
  bool b_ = false;
  int64_t i_ = 0;
  double d_ = 0;
  std::shared_ptr<std::string> s_;
  std::shared_ptr<Array> a_;
  std::shared_ptr<Object> o_;
  std::shared_ptr<Function> f_;
};

// Python's float repr: shortest round-trip digits, "1.0", "1e+16", "inf".
std::string format_float(double d);

}  // namespace areal::jinja
