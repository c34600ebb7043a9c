// Jinja engine behaviour beyond the parity corpus: errors name line and
// column, Python semantics where @huggingface/jinja differs, and the
// transformers context (special tokens, named templates).
#include <string>

#include <gtest/gtest.h>

#include "core/plugin_host/error.hpp"
#include "core/hf/chat_template/chat_template.hpp"

using areal::jinja::Object;
using areal::jinja::Template;
using areal::jinja::Value;

namespace {

std::string render(const std::string& src, const nlohmann::ordered_json& ctx = nlohmann::ordered_json::object()) {
  Object globals;
  for (const auto& [k, v] : ctx.items()) globals.set(k, Value::from_json(v));
  return Template(src).render(globals);
}

std::string error_of(const std::string& src) {
  try {
    render(src);
  } catch (const areal::Error& e) {
    return e.what();
  }
  return "<no error>";
}

}  // namespace

TEST(Jinja, UnsupportedConstructsAreErrorsWithLineAndColumn) {
  EXPECT_EQ(error_of("a\n  {% include 'x.j2' %}"), "template:2:3: unsupported tag '{% include %}'");
  EXPECT_EQ(error_of("{% for x in y recursive %}{% endfor %}"), "template:1:15: recursive loops are not supported");
  EXPECT_EQ(error_of("{{ x | nosuchfilter }}"), "template:1:6: unknown filter 'nosuchfilter'");
  EXPECT_EQ(error_of("{% if x %}never closed"), "template:1:1: '{% if %}' is never closed with '{% endif %}'");
  EXPECT_EQ(error_of("line one\n{{ 'unterminated }}"), "template:2:4: unterminated string literal");
  EXPECT_EQ(error_of("{{ a.b.c }}"), "template:1:5: 'a' is undefined (reading .b)");
  EXPECT_EQ(error_of("{% set a = {} %}{{ a.b.c }}"), "template:1:23: 'a'.b is undefined (reading .c)");
  EXPECT_EQ(error_of("{{ 'a' + 1 }}"), "template:1:8: unsupported operand type(s) for +: 'str' and 'int'");
  EXPECT_EQ(error_of("{{ raise_exception('Only user and assistant roles') }}"), "chat template raised: Only user and assistant roles");
}

TEST(Jinja, PythonValueSemantics) {
  EXPECT_EQ(render("{{ 1 }} {{ 1.0 }} {{ 1e16 }} {{ 0.1 + 0.2 }} {{ 1e-5 }} {{ 2.5e-4 }}"), "1 1.0 1e+16 0.30000000000000004 1e-05 0.00025");
  EXPECT_EQ(render("{{ x }}|{{ x | tojson }}", {{"x", {{"b", 1.5}, {"a", nullptr}, {"é", "ü\n"}}}}),
            "{'b': 1.5, 'a': None, 'é': 'ü\\n'}|{\"b\": 1.5, \"a\": null, \"é\": \"ü\\n\"}");
  EXPECT_EQ(render("{{ 'héllo'[1] }}{{ 'héllo' | length }}{{ 'héllo'[::-1] }}"), "é5olléh");
  EXPECT_EQ(render("{{ 'a\\tb  c'.split() }}{{ 'a-b-c'.split('-', 1) }}"), "['a', 'b', 'c']['a', 'b-c']");
}

TEST(Jinja, UndefinedBehavesLikeJinja2Default) {
  EXPECT_EQ(render("[{{ missing }}]{{ missing is defined }}{% for x in missing %}x{% endfor %}{{ missing | length }}"), "[]False0");
  EXPECT_EQ(render("{{ d.nokey }}|{{ d['nokey'] }}|{{ l[5] }}", {{"d", nlohmann::ordered_json::object()}, {"l", {1}}}), "||");
}

TEST(ChatTemplate, BuildsTransformersContextFromTokenizerConfig) {
  const nlohmann::json config = {
      {"bos_token", {{"__type", "AddedToken"}, {"content", "<s>"}}},
      {"eos_token", "</s>"},
      {"chat_template", nlohmann::json::array({{{"name", "default"}, {"template", "{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}{{ eos_token if add_generation_prompt }}{{ tools is none }}"}},
                                               {{"name", "tool_use"}, {"template", "{{ tools | length }}"}}})}};
  const auto chat = areal::jinja::ChatTemplate::from_tokenizer_config(config);
  EXPECT_EQ(chat.render(nlohmann::ordered_json::parse(R"([{"role": "user", "content": "hi"}])"), nullptr, true), "<s>hi</s>True");
  const auto tool = areal::jinja::ChatTemplate::from_tokenizer_config(config, "tool_use");
  EXPECT_EQ(tool.render(nlohmann::ordered_json::array(), nlohmann::ordered_json::parse("[1, 2]"), false), "2");
  EXPECT_THROW(areal::jinja::ChatTemplate::from_tokenizer_config(config, "nope"), areal::Error);
  EXPECT_THROW(areal::jinja::ChatTemplate::from_tokenizer_config(nlohmann::json::object()), areal::Error);
}

// Found by fuzz_jinja (2 ** 62 * 2 overflowed, silently, as undefined
// behaviour; a large exponent looped for ever): every limit is an error
// naming itself, never a wrapped value, a hang or a blown stack.
TEST(Jinja, ResourceLimitsAreErrorsNotHangsOrCrashes) {
  EXPECT_EQ(render("{{ 2 ** 62 }} {{ -2 ** 63 }} {{ 9223372036854775807 - 1 }} {{ 7 // -2 }}"),
            "4611686018427387904 -9223372036854775808 9223372036854775806 -4");
  EXPECT_EQ(error_of("{{ 2 ** 62 * 2 }}"), "template:1:12: integer overflow in '*' (template integers are 64-bit)");
  EXPECT_EQ(error_of("{{ 2 ** 1000000000000 }}"), "template:1:6: integer overflow in '**' (template integers are 64-bit)");
  EXPECT_EQ(error_of("{{ 9223372036854775807 + 1 }}"), "template:1:24: integer overflow in '+' (template integers are 64-bit)");
  EXPECT_EQ(error_of("{{ range(2000000) | length }}"), "range() of more than 1000000 items");
  EXPECT_EQ(render("{{ range(-9223372036854775807, 9223372036854775807, 4611686018427387904) | list }}"),
            "[-9223372036854775807, -4611686018427387903, 1, 4611686018427387905]");
  EXPECT_EQ(error_of("{{ 'ab' * 100000000 }}"), "template:1:9: string longer than 16 MiB");
  EXPECT_EQ(error_of("{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }}"), "template:1:1: macro 'f' calls nested deeper than 100");
  EXPECT_EQ(error_of(std::string(300, '(') + "1" + std::string(300, ')')), "<no error>");  // text, not an expression
  EXPECT_NE(error_of("{{ " + std::string(300, '(') + "1" + std::string(300, ')') + " }}").find("nested more than 200 deep"), std::string::npos);
  EXPECT_NE(error_of("{{ " + std::string(500, '-') + "1 }}").find("nested more than 200 deep"), std::string::npos);
  EXPECT_NE(error_of("{% for i in range(1000000) %}{{ 'x' * 1000 }}{% endfor %}").find("the rendered text would exceed 16 MiB"),
            std::string::npos);
}
