#include "core/structured_output/json_schema_matcher.hpp"

#include <cstdio>
#include <algorithm>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "core/plugin_host/error.hpp"

namespace areal::structured_output {

namespace {

constexpr uint8_t kNull = 1, kBoolean = 2, kInteger = 4, kNumber = 8, kString = 16, kArray = 32, kObject = 64;
constexpr uint8_t kAnyType = 127;
constexpr uint32_t kUnbounded = UINT32_MAX;
// A schema comes with a request: its compilation is bounded in depth (the
// compiler recurses once per level, and each level costs memory) and in
// nodes, so no client can make it take the stack or gigabytes.
constexpr size_t kMaxSchemaDepth = 64;
constexpr size_t kMaxSchemaNodes = 20000;
constexpr uint32_t kMaxWhitespace = 32;
constexpr size_t kMaxFrames = 64;  // about 32 nested containers
constexpr uint32_t kMaxNumberChars = 32;
constexpr size_t kMaxThreads = 64;  // alternatives alive at once (a union's, flattened)
constexpr size_t kTrackedProperties = 64;  // `seen` is a 64-bit mask

enum FrameKind : uint8_t { kValue, kObjectFrame, kArrayFrame, kStringFrame, kNumberFrame, kLiteral };
// Object states.
enum : uint8_t { kObjOpen, kObjAfterKey, kObjAfterValue, kObjAfterComma };
// Array states.
enum : uint8_t { kArrOpen, kArrAfterValue, kArrAfterComma };
// Number states.
enum : uint8_t { kNumMinus, kNumZero, kNumInt, kNumDot, kNumFrac, kNumE, kNumExpSign, kNumExp };

const std::vector<std::string> kBooleans = {"true", "false"};
const std::vector<std::string> kNullText = {"null"};

bool is_ws(uint8_t b) { return b == ' ' || b == '\n' || b == '\t' || b == '\r'; }
bool is_digit(uint8_t b) { return b >= '0' && b <= '9'; }
bool is_hex(uint8_t b) { return is_digit(b) || (b >= 'a' && b <= 'f') || (b >= 'A' && b <= 'F'); }

}  // namespace

bool utf8_lead(uint8_t b, uint8_t& continuations, uint8_t& lo, uint8_t& hi) {
  lo = 0x80, hi = 0xBF;
  if (b >= 0xC2 && b <= 0xDF) continuations = 1;
  else if (b >= 0xE0 && b <= 0xEF) continuations = 2;
  else if (b >= 0xF0 && b <= 0xF4) continuations = 3;
  else return false;
  // No overlong forms, no surrogates, nothing above U+10FFFF (RFC 3629).
  if (b == 0xE0) lo = 0xA0;
  if (b == 0xED) hi = 0x9F;
  if (b == 0xF0) lo = 0x90;
  if (b == 0xF4) hi = 0x8F;
  return true;
}

namespace {

}  // namespace

struct SchemaNode {
  uint8_t types = kAnyType;
  bool has_literals = false;
  std::vector<std::string> literals;  // compact JSON texts
  std::vector<std::string> property_keys;  // as written between the quotes (JSON-escaped)
  std::vector<const SchemaNode*> property_nodes;
  uint64_t required = 0;  // bit i: property i (only the first 64 are tracked)
  bool additional = true;
  const SchemaNode* additional_node = nullptr;  // null: any value
  std::vector<const SchemaNode*> prefix_items;
  const SchemaNode* items = nullptr;  // null: any value
  bool more_items = true;             // items: false after prefixItems
  uint32_t min_items = 0, max_items = kUnbounded;
  uint32_t min_length = 0, max_length = kUnbounded;
  std::vector<const SchemaNode*> any_of;
};

struct Schema::Nodes {
  std::deque<SchemaNode> all;
  SchemaNode any;  // the node for "any value"
};

Schema::Schema() : nodes_(std::make_unique<Nodes>()) {}
Schema::~Schema() = default;

namespace {

class Compiler {
 public:
  Compiler(const nlohmann::json& root, std::deque<SchemaNode>& nodes, const SchemaNode* any) : root_(root), nodes_(nodes), any_(any) {}

  const SchemaNode* compile(const nlohmann::json& s, const std::string& where) {
    struct Level {
      size_t& depth;
      explicit Level(size_t& d) : depth(++d) {}
      ~Level() { --depth; }
    } level(depth_);
    if (depth_ > kMaxSchemaDepth) fail(where, "nests deeper than " + std::to_string(kMaxSchemaDepth) + " schemas (the limit)");
    if (nodes_.size() >= kMaxSchemaNodes) fail(where, "has more than " + std::to_string(kMaxSchemaNodes) + " schemas (the limit)");
    if (s.is_boolean()) {
      if (s.get<bool>()) return any_;
      nodes_.emplace_back();
      nodes_.back().types = 0;  // `false`: nothing is valid
      return &nodes_.back();
    }
    if (!s.is_object()) fail(where, "a schema must be an object or a boolean");
    if (s.contains("$ref")) return reference(s["$ref"], where);
    nodes_.emplace_back();
    SchemaNode& n = nodes_.back();
    n.types = types_of(s, where);
    if (s.contains("const")) {
      n.has_literals = true;
      n.literals.push_back(s["const"].dump());
    } else if (s.contains("enum")) {
      if (!s["enum"].is_array()) fail(where + ".enum", "must be an array");
      n.has_literals = true;
      for (const auto& v : s["enum"]) n.literals.push_back(v.dump());
    }
    for (const char* key : {"anyOf", "oneOf"})
      if (s.contains(key)) {
        if (!s[key].is_array() || s[key].empty()) fail(where + "." + key, "must be a non-empty array");
        for (size_t i = 0; i < s[key].size(); ++i) n.any_of.push_back(compile(s[key][i], where + "." + key + "[" + std::to_string(i) + "]"));
      }
    // allOf merges into a copy; without it the schema is read where it is.
    nlohmann::json merged_copy;
    const nlohmann::json* read = &s;
    if (s.contains("allOf")) {
      merged_copy = s;
      read = &merged_copy;
    }
    nlohmann::json& merged = merged_copy;
    if (s.contains("allOf")) {  // object schemas merged: properties, required, additionalProperties
      if (!s["allOf"].is_array()) fail(where + ".allOf", "must be an array");
      for (const auto& part : s["allOf"]) {
        const nlohmann::json& p = resolve(part, where + ".allOf");
        if (!p.is_object()) continue;
        if (p.contains("properties") && p["properties"].is_object()) merged["properties"].update(p["properties"]);
        if (p.contains("required") && p["required"].is_array())
          for (const auto& r : p["required"]) merged["required"].push_back(r);
        for (const char* key : {"type", "additionalProperties", "items", "enum", "const"})
          if (p.contains(key) && !merged.contains(key)) merged[key] = p[key];
      }
      if (!s.contains("type") && merged.contains("type")) n.types = types_of(merged, where);
      if (!n.has_literals && (merged.contains("const") || merged.contains("enum"))) {
        n.has_literals = true;
        if (merged.contains("const")) n.literals.push_back(merged["const"].dump());
        else for (const auto& v : merged["enum"]) n.literals.push_back(v.dump());
      }
    }
    object_keywords(*read, n, where);
    array_keywords(*read, n, where);
    n.min_length = bound(*read, "minLength", 0, where);
    n.max_length = bound(*read, "maxLength", kUnbounded, where);
    return &n;
  }

 private:
  [[noreturn]] static void fail(const std::string& where, const std::string& what) {
    throw Error(AREAL_CODE_INVALID_ARGUMENT, "json schema at " + where + ": " + what);
  }

  static uint32_t bound(const nlohmann::json& s, const char* key, uint32_t dflt, const std::string& where) {
    if (!s.contains(key)) return dflt;
    if (!s[key].is_number_integer() || s[key].get<int64_t>() < 0) fail(where + "." + key, "must be a non-negative integer");
    return static_cast<uint32_t>(std::min<int64_t>(s[key].get<int64_t>(), kUnbounded - 1));
  }

  static uint8_t type_bit(const nlohmann::json& t, const std::string& where) {
    static const std::map<std::string, uint8_t> kTypes = {{"null", kNull},       {"boolean", kBoolean}, {"integer", kInteger}, {"number", kNumber | kInteger},
                                                          {"string", kString},   {"array", kArray},     {"object", kObject}};
    if (!t.is_string() || !kTypes.count(t.get<std::string>())) fail(where + ".type", "unknown type " + t.dump());
    return kTypes.at(t.get<std::string>());
  }

  static uint8_t types_of(const nlohmann::json& s, const std::string& where) {
    if (s.contains("type")) {
      if (s["type"].is_array()) {
        uint8_t bits = 0;
        for (const auto& t : s["type"]) bits |= type_bit(t, where);
        return bits;
      }
      return type_bit(s["type"], where);
    }
    // No type: what the keywords describe, else anything.
    if (s.contains("properties") || s.contains("required") || s.contains("additionalProperties")) return kObject;
    if (s.contains("items") || s.contains("prefixItems")) return kArray;
    return kAnyType;
  }

  void object_keywords(const nlohmann::json& s, SchemaNode& n, const std::string& where) {
    if (s.contains("properties")) {
      if (!s["properties"].is_object()) fail(where + ".properties", "must be an object");
      for (const auto& [name, sub] : s["properties"].items()) {
        const std::string quoted = nlohmann::json(name).dump();
        n.property_keys.push_back(quoted.substr(1, quoted.size() - 2));
        n.property_nodes.push_back(compile(sub, where + ".properties." + name));
      }
    }
    if (s.contains("required")) {
      if (!s["required"].is_array()) fail(where + ".required", "must be an array of names");
      for (const auto& r : s["required"]) {
        if (!r.is_string()) fail(where + ".required", "must be an array of names");
        const std::string quoted = r.dump(), key = quoted.substr(1, quoted.size() - 2);
        size_t i = std::find(n.property_keys.begin(), n.property_keys.end(), key) - n.property_keys.begin();
        if (i == n.property_keys.size()) {  // required but not described: any value
          n.property_keys.push_back(key);
          n.property_nodes.push_back(any_);
        }
        if (i < kTrackedProperties) n.required |= uint64_t{1} << i;
      }
    }
    if (s.contains("additionalProperties")) {
      const auto& a = s["additionalProperties"];
      if (a.is_boolean()) n.additional = a.get<bool>();
      else n.additional_node = compile(a, where + ".additionalProperties");
    }
  }

  void array_keywords(const nlohmann::json& s, SchemaNode& n, const std::string& where) {
    if (s.contains("prefixItems")) {
      if (!s["prefixItems"].is_array()) fail(where + ".prefixItems", "must be an array");
      for (size_t i = 0; i < s["prefixItems"].size(); ++i)
        n.prefix_items.push_back(compile(s["prefixItems"][i], where + ".prefixItems[" + std::to_string(i) + "]"));
    }
    if (s.contains("items")) {
      const auto& it = s["items"];
      if (it.is_array()) {  // draft 4-2019 tuple form
        for (size_t i = 0; i < it.size(); ++i) n.prefix_items.push_back(compile(it[i], where + ".items[" + std::to_string(i) + "]"));
      } else if (it.is_boolean() && !it.get<bool>()) {
        n.more_items = false;
      } else {
        n.items = compile(it, where + ".items");
      }
    }
    n.min_items = bound(s, "minItems", 0, where);
    n.max_items = bound(s, "maxItems", kUnbounded, where);
    if (!n.more_items) n.max_items = std::min<uint32_t>(n.max_items, static_cast<uint32_t>(n.prefix_items.size()));
  }

  // The schema a $ref names; "#", "#/$defs/X", "#/definitions/X", or any
  // JSON pointer into the document.
  const nlohmann::json& resolve(const nlohmann::json& s, const std::string& where) {
    if (!s.is_object() || !s.contains("$ref")) return s;
    const auto& ref = s["$ref"];
    if (!ref.is_string() || ref.get<std::string>().rfind('#', 0) != 0) fail(where + ".$ref", "only references inside the schema (#/...) are supported");
    try {
      return root_.at(nlohmann::json::json_pointer(ref.get<std::string>().substr(1)));
    } catch (const nlohmann::json::exception&) {
      fail(where + ".$ref", "points nowhere: " + ref.get<std::string>());
    }
  }

  const SchemaNode* reference(const nlohmann::json& ref, const std::string& where) {
    if (!ref.is_string()) fail(where + ".$ref", "must be a string");
    const std::string r = ref.get<std::string>();
    if (auto it = refs_.find(r); it != refs_.end()) return it->second;  // recursion: the node being built
    // The reference is a one-alternative union of its target, so a use that
    // is compiled while the target is still being built (recursion, or an
    // alias of such a reference) follows the finished target at match time.
    nodes_.emplace_back();
    SchemaNode& alias = nodes_.back();
    refs_[r] = &alias;
    alias.any_of.push_back(compile(resolve(nlohmann::json{{"$ref", r}}, where), where + "(" + r + ")"));
    return &alias;
  }

 public:
  // A union that reaches itself through unions alone would expand forever
  // before reading a byte ({"anyOf": [{"$ref": "#"}]}): refused.
  void check_union_cycles(const SchemaNode* root) {
    std::map<const SchemaNode*, int> state;  // 1 on the stack, 2 done
    std::vector<const SchemaNode*> todo{root};
    std::set<const SchemaNode*> seen{root};
    while (!todo.empty()) {  // every node reachable through any edge
      const SchemaNode* n = todo.back();
      todo.pop_back();
      union_dfs(n, state);
      // The matcher follows every alternative of a union at once, at most
      // kMaxThreads of them: a wider union is refused here, never cut
      // short while matching (a forced call over more tools than that is
      // prompted instead of constrained).
      if (union_leaves(n).size() > kMaxThreads)
        fail("#", "a union (anyOf/oneOf) of more than " + std::to_string(kMaxThreads) + " distinct alternatives (at most " +
                      std::to_string(kMaxThreads) + " are followed at once)");
      std::vector<const SchemaNode*> next = n->any_of;
      next.insert(next.end(), n->property_nodes.begin(), n->property_nodes.end());
      next.insert(next.end(), n->prefix_items.begin(), n->prefix_items.end());
      for (const SchemaNode* c : {n->items, n->additional_node}) if (c) next.push_back(c);
      for (const SchemaNode* c : next)
        if (seen.insert(c).second) todo.push_back(c);
    }
  }

 private:
  // The distinct schemas a union stands for (alternatives reaching the same
  // one are one thread), collected up to just past the bound.
  const std::set<const SchemaNode*>& union_leaves(const SchemaNode* n) {
    if (auto it = leaves_.find(n); it != leaves_.end()) return it->second;
    std::set<const SchemaNode*> out;
    if (n->any_of.empty()) out.insert(n);
    for (const SchemaNode* alt : n->any_of) {  // acyclic: union_dfs checked first
      for (const SchemaNode* leaf : union_leaves(alt)) {
        if (out.size() > kMaxThreads) break;
        out.insert(leaf);
      }
    }
    return leaves_[n] = std::move(out);
  }

  void union_dfs(const SchemaNode* n, std::map<const SchemaNode*, int>& state) {
    if (state[n] == 2) return;
    if (state[n] == 1) fail("#", "anyOf/oneOf/$ref refers back to itself without any input in between");
    state[n] = 1;
    for (const SchemaNode* alt : n->any_of) union_dfs(alt, state);
    state[n] = 2;
  }

  const nlohmann::json& root_;
  std::deque<SchemaNode>& nodes_;
  const SchemaNode* any_;
  std::map<std::string, const SchemaNode*> refs_;
  std::map<const SchemaNode*, std::set<const SchemaNode*>> leaves_;
  size_t depth_ = 0;
};

}  // namespace

std::shared_ptr<const Schema> Schema::compile(const nlohmann::json& schema) {
  std::shared_ptr<Schema> s(new Schema());
  Compiler c(schema, s->nodes_->all, &s->nodes_->any);
  s->root_ = c.compile(schema, "#");
  c.check_union_cycles(s->root_);
  return s;
}

std::shared_ptr<const Schema> Schema::any_object() {
  static const std::shared_ptr<const Schema> kAnyObject = compile(nlohmann::json{{"type", "object"}});
  return kAnyObject;
}

JsonMatcher::JsonMatcher(std::shared_ptr<const Schema> schema) : schema_(std::move(schema)) {
  Thread t;
  Frame root;
  root.kind = kValue;
  root.node = schema_->root();
  t.frames.push_back(root);
  threads_.push_back(std::move(t));
}

bool JsonMatcher::feed(std::string_view bytes) {
  for (char c : bytes)
    if (!feed(static_cast<uint8_t>(c))) return false;
  return true;
}

bool JsonMatcher::feed(uint8_t b) {
  std::vector<Thread> next;
  for (auto& t : threads_) step(t, b, next);
  // Alternatives that reached the same state are one (anyOf [integer, number] would double each item).
  std::vector<Thread> unique;
  for (auto& t : next)
    if (std::find(unique.begin(), unique.end(), t) == unique.end()) unique.push_back(std::move(t));
  next = std::move(unique);
  if (next.size() > kMaxThreads) next.resize(kMaxThreads);
  threads_ = std::move(next);
  return !threads_.empty();
}

namespace {

bool can_end(const JsonMatcher::Frame& f) {
  if (f.kind == kNumberFrame) return f.state == kNumZero || f.state == kNumInt || f.state == kNumFrac || f.state == kNumExp;
  if (f.kind == kLiteral) return std::find(f.literals->begin(), f.literals->end(), f.text) != f.literals->end();
  return false;
}

bool can_add_key(const JsonMatcher::Frame& obj) {
  const SchemaNode& n = *obj.node;
  if (n.additional) return true;
  for (size_t i = 0; i < n.property_keys.size(); ++i)
    if (i >= kTrackedProperties || !(obj.seen >> i & 1)) return true;
  return false;
}

bool required_done(const JsonMatcher::Frame& obj) { return (obj.node->required & ~obj.seen) == 0; }

// The schema of array item i; null when the array may not have it.
const SchemaNode* item_node(const SchemaNode& n, uint32_t i, const SchemaNode* any) {
  if (i >= n.max_items) return nullptr;
  if (i < n.prefix_items.size()) return n.prefix_items[i];
  if (!n.more_items) return nullptr;
  return n.items ? n.items : any;
}

JsonMatcher::Frame value_frame(const SchemaNode* node) {
  JsonMatcher::Frame f;
  f.kind = kValue;
  f.node = node;
  return f;
}

// A constrained key may still become one of the unwritten declared names.
// The smallest \uXXXX value that starts with the `partial` hex digits read
// (`remaining` still due) and is valid there: a low surrogate when one is
// due, else anything but a lone low surrogate. None when no value is.
std::optional<uint16_t> smallest_code_unit(uint16_t partial, int remaining, bool low_due) {
  const uint32_t lo = static_cast<uint32_t>(partial) << (4 * remaining), hi = lo + (1u << (4 * remaining)) - 1;
  if (low_due) {
    const uint32_t v = std::max<uint32_t>(lo, 0xDC00);
    return v <= std::min<uint32_t>(hi, 0xDFFF) ? std::optional<uint16_t>(static_cast<uint16_t>(v)) : std::nullopt;
  }
  if (lo < 0xDC00 || lo > 0xDFFF) return static_cast<uint16_t>(lo);
  return hi >= 0xE000 ? std::optional<uint16_t>(0xE000) : std::nullopt;
}

// A property name as written between its quotes, in the spelling
// property_keys hold (nlohmann's dump: escapes only where JSON needs them).
std::string canonical_key(const std::string& written) {
  if (written.find('\\') == std::string::npos) return written;
  const auto v = nlohmann::json::parse("\"" + written + "\"", nullptr, false);
  if (!v.is_string()) return written;
  const std::string quoted = v.dump();
  return quoted.substr(1, quoted.size() - 2);
}

bool key_prefix_ok(const JsonMatcher::Frame& obj, const std::string& text) {
  const SchemaNode& n = *obj.node;
  for (size_t i = 0; i < n.property_keys.size(); ++i) {
    if (i < kTrackedProperties && (obj.seen >> i & 1)) continue;
    if (n.property_keys[i].compare(0, text.size(), text) == 0 && n.property_keys[i].size() >= text.size()) return true;
  }
  return false;
}

}  // namespace

void JsonMatcher::step(Thread t, uint8_t b, std::vector<Thread>& out) const {
  static const SchemaNode kAny;
  while (!t.frames.empty()) {
    Frame& f = t.frames.back();
    const bool ws = is_ws(b);
    auto accept_ws = [&] {
      if (++t.whitespace <= kMaxWhitespace) out.push_back(std::move(t));
    };
    switch (f.kind) {
      case kValue: {
        if (ws) return accept_ws();
        const SchemaNode& n = *f.node;
        if (!n.any_of.empty()) {
          for (const SchemaNode* alt : n.any_of) {
            if (out.size() >= kMaxThreads) return;  // bounded work whatever the nesting
            Thread c = t;
            c.frames.back().node = alt;
            step(std::move(c), b, out);
          }
          return;
        }
        t.whitespace = 0;
        if (n.has_literals) {
          f.kind = kLiteral;
          f.literals = &n.literals;
          continue;
        }
        if (b == '{' && (n.types & kObject) && t.frames.size() < kMaxFrames) {
          f.kind = kObjectFrame;
          f.state = kObjOpen;
          out.push_back(std::move(t));
        } else if (b == '[' && (n.types & kArray) && t.frames.size() < kMaxFrames) {
          f.kind = kArrayFrame;
          f.state = kArrOpen;
          out.push_back(std::move(t));
        } else if (b == '"' && (n.types & kString)) {
          f.kind = kStringFrame;
          out.push_back(std::move(t));
        } else if ((b == '-' || is_digit(b)) && (n.types & (kInteger | kNumber))) {
          f.kind = kNumberFrame;
          f.count = 1;
          f.state = b == '-' ? kNumMinus : (b == '0' ? kNumZero : kNumInt);
          out.push_back(std::move(t));
        } else if ((b == 't' || b == 'f') && (n.types & kBoolean)) {
          f.kind = kLiteral;
          f.literals = &kBooleans;
          continue;
        } else if (b == 'n' && (n.types & kNull)) {
          f.kind = kLiteral;
          f.literals = &kNullText;
          continue;
        }
        return;
      }
      case kLiteral: {
        std::string longer = f.text;
        longer.push_back(static_cast<char>(b));
        bool prefix = false, exact = false, extends = false;
        for (const auto& lit : *f.literals)
          if (lit.compare(0, longer.size(), longer) == 0 && lit.size() >= longer.size()) {
            prefix = true;
            if (lit.size() == longer.size()) exact = true;
            else extends = true;
          }
        if (prefix) {
          t.whitespace = 0;  // a literal's own spaces are not white space between tokens
          f.text = std::move(longer);
          if (exact && !extends) t.frames.pop_back();  // nothing longer can follow: done
          out.push_back(std::move(t));
          return;
        }
        if (!can_end(f)) return;
        t.frames.pop_back();  // e.g. enum [1, 12] after "1": the byte belongs to the parent
        continue;
      }
      case kNumberFrame: {
        const bool real = f.node->types & kNumber;
        uint8_t next = 255;
        switch (f.state) {
          case kNumMinus: if (b == '0') next = kNumZero; else if (is_digit(b)) next = kNumInt; break;
          case kNumZero: if (b == '.' && real) next = kNumDot; else if ((b == 'e' || b == 'E') && real) next = kNumE; break;
          case kNumInt: if (is_digit(b)) next = kNumInt; else if (b == '.' && real) next = kNumDot; else if ((b == 'e' || b == 'E') && real) next = kNumE; break;
          case kNumDot: if (is_digit(b)) next = kNumFrac; break;
          case kNumFrac: if (is_digit(b)) next = kNumFrac; else if (b == 'e' || b == 'E') next = kNumE; break;
          case kNumE: if (b == '+' || b == '-') next = kNumExpSign; else if (is_digit(b)) next = kNumExp; break;
          case kNumExpSign: if (is_digit(b)) next = kNumExp; break;
          case kNumExp: if (is_digit(b)) next = kNumExp; break;
        }
        // A state that cannot end the number needs room for one more character.
        const bool can_end_next = next == kNumZero || next == kNumInt || next == kNumFrac || next == kNumExp;
        if (next != 255 && f.count + (can_end_next ? 1u : 2u) <= kMaxNumberChars) {
          f.state = next;
          ++f.count;
          out.push_back(std::move(t));
          return;
        }
        if (!can_end(f)) return;
        t.frames.pop_back();
        continue;
      }
      case kStringFrame: {
        t.whitespace = 0;
        const SchemaNode* n = f.node;
        const bool constrained_key = f.key && !t.frames[t.frames.size() - 2].node->additional;
        if (f.low_surrogate_due && f.escape == 0 && b != '\\') return;  // a high surrogate alone is no text
        if (f.escape == 1) {
          if (b == 'u') f.escape = 2, f.code_unit = 0;
          else if (!f.low_surrogate_due && std::string_view("\"\\/bfnrt").find(static_cast<char>(b)) != std::string_view::npos) f.escape = 0, ++f.count;
          else return;
        } else if (f.escape >= 2) {
          if (!is_hex(b)) return;
          f.code_unit = static_cast<uint16_t>(f.code_unit * 16 + (b <= '9' ? b - '0' : (b | 0x20) - 'a' + 10));
          if (!smallest_code_unit(f.code_unit, 5 - f.escape, f.low_surrogate_due)) return;  // no valid \uXXXX starts so
          if (f.escape++ == 5) {
            // UTF-16 surrogates come in pairs (one character); alone they are
            // no text (JSON parsers refuse them).
            const bool high = f.code_unit >= 0xD800 && f.code_unit <= 0xDBFF, low = f.code_unit >= 0xDC00 && f.code_unit <= 0xDFFF;
            if (f.low_surrogate_due != low) return;
            f.escape = 0;
            f.low_surrogate_due = high;
            if (!low) ++f.count;
          }
        } else if (f.utf8 > 0) {
          if (b < f.utf8_lo || b > f.utf8_hi) return;
          f.utf8_lo = 0x80, f.utf8_hi = 0xBF;
          if (--f.utf8 == 0) ++f.count;
        } else if (b == '"') {
          if (!f.key) {
            if (f.count < n->min_length) return;
            t.frames.pop_back();
            out.push_back(std::move(t));
            return;
          }
          // A property name: which value schema follows. Compared in its
          // canonical spelling, so "\u0061ge" is the property "age".
          Frame& obj = t.frames[t.frames.size() - 2];
          const SchemaNode& o = *obj.node;
          const std::string name = canonical_key(f.text);
          const size_t i = std::find(o.property_keys.begin(), o.property_keys.end(), name) - o.property_keys.begin();
          if (i < o.property_keys.size()) {
            if (i < kTrackedProperties) {
              if (obj.seen >> i & 1) return;  // written already
              obj.seen |= uint64_t{1} << i;
            }
            obj.value = o.property_nodes[i];
          } else {
            if (!o.additional) return;
            obj.value = o.additional_node ? o.additional_node : &kAny;
          }
          obj.state = kObjAfterKey;
          t.frames.pop_back();
          out.push_back(std::move(t));
          return;
        } else if (b == '\\') {
          if (!f.key && f.count >= n->max_length && !f.low_surrogate_due) return;  // a pair's low half adds no character
          f.escape = 1;
        } else if (b < 0x20) {
          return;
        } else if (b < 0x80) {
          if (!f.key && f.count >= n->max_length) return;
          ++f.count;
        } else {
          if (!f.key && f.count >= n->max_length) return;
          if (!utf8_lead(b, f.utf8, f.utf8_lo, f.utf8_hi)) return;
        }
        if (f.key) {
          f.text.push_back(static_cast<char>(b));
          if (constrained_key && !key_prefix_ok(t.frames[t.frames.size() - 2], f.text)) return;
        }
        out.push_back(std::move(t));
        return;
      }
      case kObjectFrame: {
        if (ws) return accept_ws();
        t.whitespace = 0;
        const bool open_key = b == '"' && (f.state == kObjAfterComma || (f.state == kObjOpen && can_add_key(f)));
        if (open_key) {
          Frame key;
          key.kind = kStringFrame;
          key.key = true;
          key.node = &kAny;
          t.frames.push_back(std::move(key));
          if (!t.frames[t.frames.size() - 2].node->additional && !key_prefix_ok(t.frames[t.frames.size() - 2], "")) return;
          out.push_back(std::move(t));
        } else if (b == ':' && f.state == kObjAfterKey) {
          f.state = kObjAfterValue;
          t.frames.push_back(value_frame(f.value));
          out.push_back(std::move(t));
        } else if (b == ',' && f.state == kObjAfterValue && can_add_key(f)) {
          f.state = kObjAfterComma;
          out.push_back(std::move(t));
        } else if (b == '}' && (f.state == kObjOpen || f.state == kObjAfterValue) && required_done(f)) {
          t.frames.pop_back();
          out.push_back(std::move(t));
        }
        return;
      }
      case kArrayFrame: {
        if (ws) return accept_ws();
        const SchemaNode& n = *f.node;
        if (f.state == kArrAfterValue) {
          t.whitespace = 0;
          if (b == ',' && item_node(n, f.count, &kAny)) {
            f.state = kArrAfterComma;
            out.push_back(std::move(t));
          } else if (b == ']' && f.count >= n.min_items) {
            t.frames.pop_back();
            out.push_back(std::move(t));
          }
          return;
        }
        if (b == ']' && f.state == kArrOpen) {
          if (n.min_items > 0) return;
          t.whitespace = 0;
          t.frames.pop_back();
          out.push_back(std::move(t));
          return;
        }
        const SchemaNode* item = item_node(n, f.count, &kAny);
        if (!item) return;
        f.state = kArrAfterValue;
        ++f.count;
        t.frames.push_back(value_frame(item));
        continue;  // the byte starts the item
      }
    }
    return;
  }
}

bool JsonMatcher::complete() const {
  for (const auto& t : threads_)
    if (t.frames.empty() || (t.frames.size() == 1 && can_end(t.frames[0]))) return true;
  return false;
}

namespace {

constexpr size_t kMaxCompletionDepth = 24;
constexpr uint32_t kMaxPaddedLength = 256;  // a longer minLength is not padded (no completion)
const SchemaNode kAnyValue;

// The shortest compact JSON text node accepts.
std::optional<std::string> shortest_value(const SchemaNode& n, size_t depth) {
  if (depth > kMaxCompletionDepth) return std::nullopt;
  std::optional<std::string> best;
  auto offer = [&](std::optional<std::string> s) {
    if (s && (!best || s->size() < best->size())) best = std::move(s);
  };
  if (!n.any_of.empty()) {
    for (const SchemaNode* alt : n.any_of) offer(shortest_value(*alt, depth + 1));
    return best;
  }
  if (n.has_literals) {
    for (const auto& lit : n.literals) offer(lit);
    return best;
  }
  if (n.types & (kInteger | kNumber)) offer(std::string("0"));
  if ((n.types & kString) && n.min_length <= kMaxPaddedLength && n.min_length <= n.max_length)
    offer("\"" + std::string(n.min_length, 'a') + "\"");
  if (n.types & kNull) offer(std::string("null"));
  if (n.types & kBoolean) offer(std::string("true"));
  if ((n.types & kArray) && (!best || best->size() > 2)) {
    std::optional<std::string> s = std::string("[");
    for (uint32_t i = 0; s && i < n.min_items; ++i) {
      const SchemaNode* item = item_node(n, i, &kAnyValue);
      auto v = item ? shortest_value(*item, depth + 1) : std::nullopt;
      if (!v) s.reset();
      else *s += (i ? "," : "") + *v;
    }
    if (s) offer(*s + "]");
  }
  if ((n.types & kObject) && (!best || best->size() > 2)) {
    std::optional<std::string> s = std::string("{");
    bool first = true;
    for (size_t i = 0; s && i < n.property_keys.size() && i < kTrackedProperties; ++i) {
      if (!(n.required >> i & 1)) continue;
      auto v = shortest_value(*n.property_nodes[i], depth + 1);
      if (!v) s.reset();
      else *s += (first ? "\"" : ",\"") + n.property_keys[i] + "\":" + *v;
      first = false;
    }
    if (s) offer(*s + "}");
  }
  return best;
}

// The name the shortest completion writes for an object's next property:
// a missing required one first, else (any_declared) any unwritten declared
// one; only those starting with `prefix` (a key already begun).
std::optional<std::string> next_key(const JsonMatcher::Frame& obj, const std::string& prefix, bool any_declared) {
  const SchemaNode& n = *obj.node;
  std::optional<std::string> best;
  for (int pass = 0; pass < 2 && !best; ++pass)
    for (size_t i = 0; i < n.property_keys.size() && i < kTrackedProperties; ++i) {
      const std::string& k = n.property_keys[i];
      const bool wanted = pass == 0 ? (n.required >> i & 1) : any_declared;
      if (!wanted || (obj.seen >> i & 1) || k.compare(0, prefix.size(), prefix) != 0 || k.size() < prefix.size()) continue;
      if (!best || k.size() < best->size()) best = k;
    }
  return best;
}

// The next bytes on thread t's shortest way to a whole value: what its
// innermost unfinished construct needs next.
std::optional<std::string> closing_chunk(const JsonMatcher::Thread& t) {
  for (size_t k = t.frames.size(); k-- > 0;) {
    const JsonMatcher::Frame& f = t.frames[k];
    switch (f.kind) {
      case kValue:
        return shortest_value(*f.node, 0);
      case kLiteral: {
        if (can_end(f)) continue;  // finished; its parent goes on
        std::optional<std::string> best;
        for (const auto& lit : *f.literals)
          if (lit.compare(0, f.text.size(), f.text) == 0 && lit.size() > f.text.size() && (!best || lit.size() - f.text.size() < best->size()))
            best = lit.substr(f.text.size());
        return best;
      }
      case kNumberFrame:
        if (can_end(f)) continue;
        return std::string("0");
      case kStringFrame: {
        if (f.low_surrogate_due && f.escape == 0) return std::string("\\udc00");
        if (f.escape == 1) return std::string(f.low_surrogate_due ? "udc00" : "n");
        if (f.escape >= 2) {
          // The rest of the \uXXXX, and the low half of a pair it opens.
          const int remaining = 6 - f.escape;
          const auto v = smallest_code_unit(f.code_unit, remaining, f.low_surrogate_due);
          if (!v) return std::nullopt;
          char hex[8];
          std::snprintf(hex, sizeof hex, "%04x", *v);
          const bool opens_pair = *v >= 0xD800 && *v <= 0xDBFF;
          return std::string(hex + 4 - remaining) + (opens_pair ? "\\udc00" : "");
        }
        if (f.utf8 > 0) return std::string(1, static_cast<char>(f.utf8_lo));
        if (!f.key) return std::string(f.count < f.node->min_length ? f.node->min_length - f.count : 0, 'a') + "\"";
        const JsonMatcher::Frame& obj = t.frames[k - 1];
        const bool free_names = obj.node->additional;
        if (auto name = next_key(obj, f.text, !free_names)) return name->substr(f.text.size()) + "\"";
        if (!free_names) return std::nullopt;
        // A name written already may not close here; one more byte makes it new.
        std::string name = f.text;
        const auto& keys = obj.node->property_keys;
        while (std::find(keys.begin(), keys.end(), name) != keys.end()) name += '_';
        return name.substr(f.text.size()) + "\"";
      }
      case kObjectFrame: {
        if (f.state == kObjAfterKey) return std::string(":");
        if (f.state != kObjAfterComma && required_done(f)) return std::string("}");
        auto name = next_key(f, "", true);
        if (!name && f.node->additional) name = std::string("");  // any name may follow a comma
        if (!name) return std::nullopt;
        return (f.state == kObjAfterValue ? ",\"" : "\"") + *name + "\"";
      }
      case kArrayFrame: {
        const SchemaNode& n = *f.node;
        if (f.state == kArrAfterValue) return std::string(f.count >= n.min_items ? "]" : ",");
        if (f.state == kArrOpen && n.min_items == 0) return std::string("]");
        const SchemaNode* item = item_node(n, f.count, &kAnyValue);
        if (!item) return std::nullopt;
        return shortest_value(*item, 0);
      }
    }
    return std::nullopt;
  }
  return std::string();
}

}  // namespace

std::optional<std::string> JsonMatcher::shortest_completion() const {
  std::optional<std::string> best;
  for (const Thread& start : threads_) {
    JsonMatcher m = *this;
    m.threads_ = {start};
    std::string out;
    // Each chunk finishes at least one byte of a bounded construct; the guard
    // only stops a schema the chunks cannot satisfy.
    for (int guard = 0; guard < 1024 && !m.complete(); ++guard) {
      auto chunk = closing_chunk(m.threads_[0]);
      if (!chunk || chunk->empty() || !m.feed(*chunk)) break;
      out += *chunk;
    }
    if (m.complete() && (!best || out.size() < best->size())) best = std::move(out);
  }
  return best;
}

bool JsonMatcher::in_free_string() const {
  if (threads_.size() != 1 || threads_[0].frames.empty()) return false;
  const Frame& f = threads_[0].frames.back();
  if (f.kind != kStringFrame || f.escape != 0 || f.utf8 != 0 || f.low_surrogate_due) return false;
  if (f.key) return threads_[0].frames[threads_[0].frames.size() - 2].node->additional;
  return f.node->max_length == kUnbounded;
}

bool JsonMatcher::in_free_property_name() const { return in_free_string() && threads_[0].frames.back().key; }

bool JsonMatcher::property_name_may_be_declared() const {
  const auto& frames = threads_[0].frames;
  const std::string& text = frames.back().text;
  for (const auto& k : frames[frames.size() - 2].node->property_keys)
    if (k.compare(0, text.size(), text) == 0 && k.size() >= text.size()) return true;
  return false;
}

}  // namespace areal::structured_output
