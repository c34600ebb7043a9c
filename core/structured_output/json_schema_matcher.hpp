// Constrained decoding, part 1: a JSON Schema compiled into a byte-level
// matcher that says whether a prefix can still become a valid output.
//
// Supported (everything else is accepted and not enforced; docs/http-api.md):
// type (one or a list), enum, const, properties, required,
// additionalProperties (false / a schema / true), items, prefixItems,
// minItems, maxItems, minLength, maxLength, anyOf, oneOf (as anyOf), allOf of
// object schemas (merged), $ref to "#", "#/$defs/..." and "#/definitions/...".
// The matcher follows several alternatives at once (anyOf), so it never
// commits to one too early.
//
// Output shape: any JSON the schema allows, with runs of at most 32
// whitespace bytes between tokens, containers nested at most 32 deep and
// numbers of at most 32 characters, so a random policy cannot wander forever.
// Property names of an object with additionalProperties: false are the
// declared ones, each once; enum/const values are written as compact JSON.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace areal::structured_output {

struct SchemaNode;

// A compiled schema. Immutable; shared by every request that uses it.
class Schema {
 public:
  // Throws areal::Error (INVALID_ARGUMENT) for a schema that is not a JSON
  // Schema (not an object or boolean, a type name that does not exist, a
  // $ref that points nowhere), naming the place in the schema.
  static std::shared_ptr<const Schema> compile(const nlohmann::json& schema);
  // Any JSON object: OpenAI's response_format {"type": "json_object"}.
  static std::shared_ptr<const Schema> any_object();

  const SchemaNode* root() const { return root_; }
  ~Schema();

 private:
  Schema();
  struct Nodes;
  std::unique_ptr<Nodes> nodes_;
  const SchemaNode* root_ = nullptr;
};

// The state of one output being generated. Cheap to copy (the token mask
// explores the vocabulary by copying it); copies are independent.
class JsonMatcher {
 public:
  explicit JsonMatcher(std::shared_ptr<const Schema> schema);

  // Appends one byte; false when no valid output starts with the bytes so
  // far plus this one (the matcher is then dead: copy before probing).
  bool feed(uint8_t byte);
  bool feed(std::string_view bytes);

  // The bytes so far are a whole valid value (the output may end here).
  bool complete() const;
  // Inside a string whose contents are free: every sequence of whole UTF-8
  // characters without '"', '\\' or control characters continues it. Lets
  // the token mask accept such tokens without walking their bytes.
  bool in_free_string() const;
  // That free string is a property name (plain text can then lengthen the
  // shortest completion: a required name it no longer spells is still due).
  bool in_free_property_name() const;
  // In such a name: the bytes so far begin one of the object's declared
  // names (beyond them, plain text changes nothing the completion needs).
  bool property_name_may_be_declared() const;
  // The shortest bytes that make the output so far a whole valid value
  // ("" when it is one already): strings closed (padded to minLength),
  // numbers and literals finished, missing required properties and minItems
  // items added with their shortest values, containers closed. nullopt when
  // none is found (a schema whose values nest past the search's depth).
  // Budget-aware decoding follows it when max_tokens runs short.
  std::optional<std::string> shortest_completion() const;

  // One open JSON construct (implementation detail, public so copies are
  // plain value copies).
  struct Frame {
    uint8_t kind = 0;             // FrameKind in the .cpp
    uint8_t state = 0;            // per kind
    uint8_t escape = 0;           // string: 1 after '\', 2..5 inside \uXXXX
    uint8_t utf8 = 0;             // string: continuation bytes still due
    uint8_t utf8_lo = 0x80, utf8_hi = 0xBF;  // string: range of the next continuation byte
    uint16_t code_unit = 0;       // string: the \uXXXX being read
    bool low_surrogate_due = false;  // string: a \uD800-\uDBFF was read; its \uDC00-\uDFFF must follow
    bool key = false;             // string: an object's property name
    uint32_t count = 0;           // array items, string characters, number characters
    uint64_t seen = 0;            // object: declared properties already written (bit i)
    const SchemaNode* node = nullptr;
    const SchemaNode* value = nullptr;                    // object: schema of the current key's value
    const std::vector<std::string>* literals = nullptr;   // literal: the allowed texts
    std::string text;                                     // literal / key: bytes so far
    bool operator==(const Frame& o) const {
      return kind == o.kind && state == o.state && escape == o.escape && utf8 == o.utf8 && utf8_lo == o.utf8_lo && utf8_hi == o.utf8_hi &&
             code_unit == o.code_unit && low_surrogate_due == o.low_surrogate_due &&
             key == o.key && count == o.count && seen == o.seen && node == o.node && value == o.value && literals == o.literals && text == o.text;
    }
  };
  struct Thread {
    std::vector<Frame> frames;
    uint32_t whitespace = 0;  // consecutive white-space bytes
    bool operator==(const Thread& o) const { return whitespace == o.whitespace && frames == o.frames; }
  };

 private:
  void step(Thread t, uint8_t b, std::vector<Thread>& out) const;

  std::shared_ptr<const Schema> schema_;
  std::vector<Thread> threads_;
};

// A UTF-8 lead byte: how many continuation bytes follow and the range of the
// first one (RFC 3629: no overlong forms, surrogates or code points past
// U+10FFFF). False for a byte that cannot start a multi-byte character.
bool utf8_lead(uint8_t b, uint8_t& continuations, uint8_t& lo, uint8_t& hi);

}  // namespace areal::structured_output
