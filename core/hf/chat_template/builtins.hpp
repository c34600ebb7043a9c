// Internal: Jinja filters, tests, methods and globals with Python semantics.
#pragma once

#include <string>
#include <cstdint>

#include "ast.hpp"

namespace areal::jinja {

[[noreturn]] void runtime_error(Pos p, const std::string& what);

// What one render may use. Chat templates are short; these only stop a
// broken or hostile template (or value) from hanging or exhausting the
// gateway: each is far beyond any real template, and hitting one is an
// INVALID_ARGUMENT naming it. Integers are 64-bit (Python's are unbounded):
// an overflow is an error, never a wrapped value.
constexpr size_t kMaxNesting = 200;            // blocks and expressions inside each other
constexpr size_t kMaxMacroDepth = 100;         // macro calls inside each other
constexpr size_t kMaxStringBytes = 16u << 20;  // any string built, the output included
constexpr int64_t kMaxRangeItems = 1000000;    // range() length

// Python code-point helpers.
std::u32string to_u32(const std::string& s);
std::string from_u32(const std::u32string& s);

Value apply_filter(const std::string& name, Value& input, Array& args, Kwargs& kwargs, Pos p);
bool apply_test(const std::string& name, const Value& input, Array& args, Pos p);
// obj.name for str/dict methods; Undefined if none (and no such key).
Value get_attr(const Value& obj, const std::string& name, Pos p);
Value get_item(const Value& obj, const Value& key, Pos p);
Value slice(const Value& obj, const Value& lo, const Value& hi, const Value& step, Pos p);
Object make_globals();  // range, namespace, raise_exception, strftime_now, dict

// Operators.
Value binary_op(const std::string& op, const Value& a, const Value& b, Pos p);
bool contains(const Value& container, const Value& item, Pos p);
// Items a for loop visits (dict -> keys, str -> characters).
Array iterate(const Value& v, Pos p);

}  // namespace areal::jinja
