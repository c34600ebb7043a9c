#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/config/config_loader.hpp"
#include "core/config/config_schema.hpp"
#include "core/plugin_host/error.hpp"
#include "core/config/run_config.hpp"
#include "gateway_builtin.h"

using areal::Json;
namespace config = areal::config;

namespace {

std::vector<std::string> validate(const char* schema, Json& value) {
  std::vector<std::string> errors;
  config::validate(Json::parse(schema), value, "sec", errors);
  return errors;
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& e : v) s += e + "\n";
  return s;
}

}  // namespace

TEST(YamlToJson, PlainScalarsFollowTheCoreSchemaAndQuotedStayStrings) {
  Json j = config::yaml_to_json("a: 8\nb: '8'\nc: true\nd: 1.5\ne: ~\nf: hello\ng: [1, x]\nh: \"true\"\n", "t.yaml");
  EXPECT_EQ(j["a"], 8);
  EXPECT_EQ(j["b"], "8");
  EXPECT_EQ(j["c"], true);
  EXPECT_DOUBLE_EQ(j["d"].get<double>(), 1.5);
  EXPECT_TRUE(j["e"].is_null());
  EXPECT_EQ(j["f"], "hello");
  EXPECT_EQ(j["g"], Json::parse(R"([1, "x"])"));
  EXPECT_EQ(j["h"], "true");
}

TEST(YamlToJson, SyntaxErrorsAndDuplicateKeysNameFileLineAndColumn) {
  try {
    config::yaml_to_json("a: 1\nb: [1, 2\n", "bad.yaml");
    FAIL() << "no error";
  } catch (const areal::Error& e) {
    EXPECT_EQ(e.code(), AREAL_CODE_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("bad.yaml:"), std::string::npos) << e.what();
  }
  try {
    config::yaml_to_json("a: 1\na: 2\n", "dup.yaml");
    FAIL() << "no error";
  } catch (const areal::Error& e) {
    EXPECT_NE(std::string(e.what()).find("dup.yaml:2:1: duplicate key 'a'"), std::string::npos) << e.what();
  }
}

// Found by fuzz_config: a YAML value that is not UTF-8 reached the schema's
// error message, whose JSON dump threw a type error instead of an areal::Error.
TEST(YamlToJson, TextThatIsNotUtf8IsRefusedWithItsPlace) {
  try {
    config::yaml_to_json("a: 1\nname: ab\xff\n", "bytes.yaml");
    FAIL() << "no error";
  } catch (const areal::Error& e) {
    EXPECT_EQ(e.code(), AREAL_CODE_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("bytes.yaml:2:9: not valid UTF-8 (byte 13)"), std::string::npos) << e.what();
  }
  Json config = Json::object();
  EXPECT_THROW(config::apply_override(config, "experiment.name=\xc3"), areal::Error);
  // Valid UTF-8 with control bytes and NULs, which yaml-cpp decodes into
  // bytes that are not UTF-8 (found by fuzz_config).
  static const char kControls[] = "a: 1\nb: \x01\0\0\0O1.9\n";
  const std::string controls(kControls, sizeof kControls - 1);  // the NULs included, the terminator not
  try {
    config::yaml_to_json(controls, "controls.yaml");
    FAIL() << "no error";
  } catch (const areal::Error& e) {
    EXPECT_EQ(e.code(), AREAL_CODE_INVALID_ARGUMENT);
  }
}

// Found by fuzz_config: a float literal beyond a double's range threw
// std::out_of_range out of the loader (areal-host aborted).
TEST(Overrides, ANumberOutOfRangeIsAnErrorNotACrash) {
  Json config = Json::object();
  try {
    config::apply_override(config, "train.lr=1e999");
    FAIL() << "no error";
  } catch (const areal::Error& e) {
    EXPECT_NE(std::string(e.what()).find("the number 1e999 is out of range for a double"), std::string::npos) << e.what();
  }
}

TEST(Overrides, CreateNestedKeysAndParseValuesAsYaml) {
  Json c = Json::object();
  config::apply_override(c, "gateway.port=9000");
  config::apply_override(c, "a.b.c=[1, 2]");
  config::apply_override(c, "name='007'");
  config::apply_override(c, "path=some/dir=x");
  EXPECT_EQ(c["gateway"]["port"], 9000);
  EXPECT_EQ(c["a"]["b"]["c"], Json::parse("[1,2]"));
  EXPECT_EQ(c["name"], "007");
  EXPECT_EQ(c["path"], "some/dir=x");
  EXPECT_THROW(config::apply_override(c, "novalue"), areal::Error);
  EXPECT_THROW(config::apply_override(c, "a..b=1"), areal::Error);
  EXPECT_THROW(config::apply_override(c, "gateway.port.x=1"), areal::Error);  // port is a number, not a mapping
}

TEST(Schema, FillsDefaultsAndChecksTypesRangesEnums) {
  const char* schema = R"({"type": "object", "keys": {
      "port": {"type": "integer", "default": 8080, "minimum": 0, "maximum": 65535},
      "mode": {"type": "string", "enum": ["a", "b"], "default": "a"},
      "ratio": {"type": "number", "default": 0.5},
      "name": {"type": "string"}}})";
  Json v = Json::parse(R"({"name": "x", "ratio": 1})");
  EXPECT_TRUE(validate(schema, v).empty());
  EXPECT_EQ(v["port"], 8080);
  EXPECT_EQ(v["mode"], "a");
  EXPECT_EQ(v["ratio"], 1);  // an integer is a valid number

  Json bad = Json::parse(R"({"port": "80", "mode": "c", "ratio": 2})");
  auto errors = validate(schema, bad);
  const std::string all = joined(errors);
  EXPECT_NE(all.find("'sec.port' must be an integer, got string \"80\""), std::string::npos) << all;
  EXPECT_NE(all.find("'sec.mode' must be one of [\"a\",\"b\"]"), std::string::npos) << all;
  EXPECT_NE(all.find("missing required key 'sec.name'"), std::string::npos) << all;

  Json range = Json::parse(R"({"name": "x", "port": 70000})");
  EXPECT_NE(joined(validate(schema, range)).find("'sec.port' must be <= 65535"), std::string::npos);
}

TEST(Schema, UnknownKeysSuggestTheNearestValidKey) {
  const char* schema = R"({"type": "object", "keys": {"max_threads": {"type": "integer", "default": 1},
                                                      "host": {"type": "string", "default": "x"}}})";
  Json v = Json::parse(R"({"max_thread": 4, "zzzzzzzz": 1})");
  const std::string all = joined(validate(schema, v));
  EXPECT_NE(all.find("unknown key 'sec.max_thread' (did you mean 'sec.max_threads'?)"), std::string::npos) << all;
  EXPECT_NE(all.find("unknown key 'sec.zzzzzzzz'\n"), std::string::npos) << "no suggestion for a far-off key: " << all;
}

TEST(Schema, MalformedSchemasAreRejected) {
  EXPECT_THROW(config::check_schema(Json::parse(R"({"type": "integr"})"), "p"), areal::Error);
  EXPECT_THROW(config::check_schema(Json::parse(R"({"type": "integer", "default": "x"})"), "p"), areal::Error);
  EXPECT_NO_THROW(config::check_schema(Json::parse(R"({"type": "object", "keys": {"a": {"type": "any"}}})"), "p"));
}

class ResolveConfig : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("AREAL_PLUGIN_PATH", AREAL_TEST_PLUGIN_DIR, 1);
    areal::register_builtin("gateway", &areal_builtin_gateway_init);
  }
};

TEST_F(ResolveConfig, ChecksHostKeysAndEachPluginSectionAgainstItsSchema) {
  Json raw = config::yaml_to_json(R"(
rollot: {episodes: 2}
inference: {plugin: mock_inference, vocab_sise: 10}
workflow: {plugin: token_match, temperature: "hot"}
gateway: {plugin: none}
)", "t.yaml");
  auto rc = areal::resolve_config(raw, ".");
  const std::string all = joined(rc.errors);
  EXPECT_NE(all.find("unknown key 'rollot' (did you mean 'rollout'?)"), std::string::npos) << all;
  EXPECT_NE(all.find("unknown key 'inference.vocab_sise' (did you mean 'inference.vocab_size'?)"), std::string::npos) << all;
  EXPECT_NE(all.find("'workflow.temperature' must be a number"), std::string::npos) << all;
  EXPECT_EQ(rc.effective["gateway"]["plugin"], "none");
}

TEST_F(ResolveConfig, FillsDefaultsAndHandsPluginsTheirSectionWithoutThePluginKey) {
  Json raw = config::yaml_to_json("workflow: {plugin: token_match}\n", "t.yaml");
  auto rc = areal::resolve_config(raw, "/base");
  ASSERT_TRUE(rc.errors.empty()) << joined(rc.errors);
  EXPECT_EQ(rc.effective["rollout"]["concurrency"], 4);
  EXPECT_EQ(rc.effective["inference"]["plugin"], "mock_inference");  // the default backend
  EXPECT_EQ(rc.effective["gateway"]["port"], 8080);
  Json section = Json::parse(rc.section_json("workflow"));
  EXPECT_FALSE(section.contains("plugin"));
  EXPECT_EQ(section["temperature"], 1.0);
  EXPECT_EQ(rc.path("data.jsonl"), "/base/data.jsonl");
  EXPECT_EQ(rc.path("/abs.jsonl"), "/abs.jsonl");
}

TEST_F(ResolveConfig, WrongKindAndUnknownPluginAreErrorsWithHints) {
  Json raw = config::yaml_to_json("workflow: {plugin: sft}\ninference: {plugin: mock_inferenc}\n", "t.yaml");
  auto rc = areal::resolve_config(raw, ".");
  const std::string all = joined(rc.errors);
  EXPECT_NE(all.find("is a algorithm plugin, but a workflow plugin is needed here"), std::string::npos) << all;
  EXPECT_NE(all.find("no plugin named 'mock_inferenc' (did you mean 'mock_inference'?)"), std::string::npos) << all;
}

// A host section that is not a mapping is an error in the list, never a
// throw that loses the others.
TEST_F(ResolveConfig, AHostSectionThatIsNotAMappingIsListedNotThrown) {
  for (const char* yaml : {"plugins: ../build\n", "plugins: [a, b]\n", "plugins: {search_paths: x}\n"}) {
    const Json raw = config::yaml_to_json(yaml, "t.yaml");
    areal::ResolvedConfig rc;
    ASSERT_NO_THROW(rc = areal::resolve_config(raw, ".")) << yaml;
    EXPECT_NE(joined(rc.errors).find("plugins"), std::string::npos) << yaml << joined(rc.errors);
  }
}

// `extends`: a config that swaps one plugin keeps everything else of its base.
TEST(Extends, MergesOverTheBaseAndReplacesASectionThatNamesAnotherPlugin) {
  const std::string dir = testing::TempDir() + "/extends-test";
  std::filesystem::create_directories(dir + "/sub");
  std::ofstream(dir + "/base.yaml") << "experiment: {name: q, seed: 1}\n"
                                       "inference: {plugin: local, model_path: m, max_batch: 64}\n"
                                       "trainer: {total_steps: 600, batch_size: 64}\n";
  std::ofstream(dir + "/sub/swap.yaml") << "extends: ../base.yaml\n"
                                           "inference: {plugin: sglang, servers: [\"http://127.0.0.1:30000\"]}\n"
                                           "trainer: {total_steps: 10}\n";
  const Json j = config::load_yaml_file(dir + "/sub/swap.yaml");
  EXPECT_FALSE(j.contains("extends"));
  EXPECT_EQ(j["experiment"]["name"], "q");
  EXPECT_EQ(j["trainer"]["total_steps"], 10);   // merged key by key
  EXPECT_EQ(j["trainer"]["batch_size"], 64);
  EXPECT_EQ(j["inference"], Json::parse(R"({"plugin": "sglang", "servers": ["http://127.0.0.1:30000"]})"));  // replaced whole
  // Naming the base's default plugin again, or leaving a section empty, keeps the base's keys.
  std::ofstream(dir + "/base2.yaml") << "gateway: {port: 8000}\nworkflow: {plugin: token_match, episodes: 3}\n";
  std::ofstream(dir + "/same.yaml") << "extends: base2.yaml\ngateway: {plugin: gateway, admin_api_key: k}\nworkflow:\n";
  const Json same = config::load_yaml_file(dir + "/same.yaml");
  EXPECT_EQ(same["gateway"]["port"], 8000);
  EXPECT_EQ(same["gateway"]["admin_api_key"], "k");
  EXPECT_EQ(same["workflow"]["episodes"], 3);
  // A base section that names no plugin is its default's (inference: mock_inference):
  // another plugin over it replaces it whole too.
  std::ofstream(dir + "/base3.yaml") << "inference: {vocab_size: 512}\n";
  std::ofstream(dir + "/other.yaml") << "extends: base3.yaml\ninference: {plugin: local, model_path: m}\n";
  EXPECT_EQ(config::load_yaml_file(dir + "/other.yaml")["inference"], Json::parse(R"({"plugin": "local", "model_path": "m"})"));
  std::ofstream(dir + "/loop.yaml") << "extends: loop.yaml\n";
  try {
    config::load_yaml_file(dir + "/loop.yaml");
    FAIL() << "a cycle was accepted";
  } catch (const areal::Error& e) {
    EXPECT_NE(std::string(e.what()).find("deeper than 8"), std::string::npos) << e.what();
  }
}
