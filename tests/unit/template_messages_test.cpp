// What the gateway gives a chat template (proxy/template_messages.hpp): tool
// calls' arguments as objects, and system messages folded into the first
// only where the template refuses them in place.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/plugin_host/error.hpp"
#include "plugins/gateway/proxy/template_messages.hpp"

using areal::jinja::ChatTemplate;
using areal::proxy::TemplateMessages;
using J = nlohmann::ordered_json;

namespace {

// Renders each message as "role:content"; refuses a late system message when `strict`.
ChatTemplate plain_template(bool strict) {
  std::string source = "{%- for m in messages %}";
  if (strict) source += "{%- if m.role == 'system' and not loop.first %}{{ raise_exception('system first') }}{%- endif %}";
  source += "{{- m.role + ':' + m.content + '|' }}{%- endfor %}";
  return ChatTemplate(source, J::object());
}

J call(const J& arguments) { return {{"id", "c"}, {"type", "function"}, {"function", {{"name", "f"}, {"arguments", arguments}}}}; }

J assistant_with(const J& calls) { return {{"role", "assistant"}, {"content", ""}, {"tool_calls", calls}}; }

}  // namespace

TEST(TemplateMessages, ArgumentsBecomeTheObjectsTheyEncode) {
  const TemplateMessages prepare(plain_template(false));
  std::vector<std::string> rewrites;
  const J out = prepare.prepare(J::array({assistant_with(J::array({call("{\"a\":1,\"b\":[true]}"), call(J{{"x", 2}}), call(""), call(nullptr)}))}),
                                [&](const std::string& kind) { rewrites.push_back(kind); });
  const J& calls = out[0]["tool_calls"];
  EXPECT_EQ(calls[0]["function"]["arguments"], (J{{"a", 1}, {"b", {true}}}));
  EXPECT_EQ(calls[1]["function"]["arguments"], (J{{"x", 2}})) << "an object stays";
  EXPECT_EQ(calls[2]["function"]["arguments"], J::object()) << "no arguments: {}";
  EXPECT_EQ(calls[3]["function"]["arguments"], J::object());
  EXPECT_TRUE(rewrites.empty()) << "well-formed and absent arguments are not a rewrite";
}

TEST(TemplateMessages, ArgumentsThatAreNoObjectBecomeEmptyAndAreReported) {
  const TemplateMessages prepare(plain_template(false));
  for (const std::string bad : {"not json", "[1, 2]", "42", "\"text\"", "{\"open\": "}) {
    std::vector<std::string> rewrites;
    const J out = prepare.prepare(J::array({assistant_with(J::array({call(bad)}))}), [&](const std::string& kind) { rewrites.push_back(kind); });
    EXPECT_EQ(out[0]["tool_calls"][0]["function"]["arguments"], J::object()) << bad;
    EXPECT_EQ(rewrites, std::vector<std::string>{"tool_arguments_not_an_object"}) << bad;
  }
  std::string deep;
  for (int i = 0; i < 200; ++i) deep += "{\"a\":";
  EXPECT_THROW(prepare.prepare(J::array({assistant_with(J::array({call(deep)}))})), areal::Error) << "past the nesting limit: a 400";
}

TEST(TemplateMessages, AnEmptyToolCallListIsLeftOutAndTheRequestIsNotChanged) {
  const TemplateMessages prepare(plain_template(false));
  const J messages = J::array({assistant_with(J::array()), assistant_with(J::array({call("{}")}))});
  const J out = prepare.prepare(messages);
  EXPECT_FALSE(out[0].contains("tool_calls"));
  EXPECT_TRUE(messages[0].contains("tool_calls")) << "the caller's messages are left as they are";
  EXPECT_TRUE(messages[1]["tool_calls"][0]["function"]["arguments"].is_string());
}

TEST(TemplateMessages, SystemMessagesStayInPlaceWhereTheTemplateRendersThem) {
  const TemplateMessages prepare(plain_template(false));
  EXPECT_FALSE(prepare.folds_inline_system);
  const J messages = J::array({{{"role", "user"}, {"content", "u"}}, {{"role", "system"}, {"content", "s"}}});
  EXPECT_EQ(prepare.prepare(messages), messages);
  EXPECT_EQ(TemplateMessages::leading_system(messages), "");
}

TEST(TemplateMessages, WhereTheTemplateRefusesThemEverySystemTextJoinsTheFirstInOrder) {
  const ChatTemplate strict = plain_template(true);
  const TemplateMessages prepare(strict);
  ASSERT_TRUE(prepare.folds_inline_system);
  std::vector<std::string> rewrites;
  const J messages = J::array({{{"role", "system"}, {"content", "A"}}, {{"role", "system"}, {"content", "B"}}, {{"role", "user"}, {"content", "u"}},
                               {{"role", "assistant"}, {"content", "r"}}, {{"role", "system"}, {"content", "C"}}, {{"role", "user"}, {"content", "v"}}});
  EXPECT_THROW(strict.render(messages, nullptr, false), areal::Error) << "the template itself refuses them";
  const J out = prepare.prepare(messages, [&](const std::string& kind) { rewrites.push_back(kind); });
  EXPECT_EQ(strict.render(out, nullptr, false), "system:A\nB\nC|user:u|assistant:r|user:v|");
  EXPECT_EQ(TemplateMessages::leading_system(out), "A\nB\nC");
  EXPECT_EQ(rewrites, std::vector<std::string>{"inline_system_folded"});
  // A conversation without a late system message is left as it is; one without any gains none.
  const J plain = J::array({{{"role", "system"}, {"content", "A"}}, {{"role", "user"}, {"content", "u"}}});
  EXPECT_EQ(prepare.prepare(plain), plain);
  const J late = J::array({{{"role", "user"}, {"content", "u"}}, {{"role", "system"}, {"content", "S"}}});
  EXPECT_EQ(strict.render(prepare.prepare(late), nullptr, false), "system:S|user:u|");
}

TEST(TemplateMessages, ATemplateThatAddsArgumentsToItsTextKeepsTheStrings) {
  // As DeepSeek V3.1's template writes a call: the arguments joined to a string with +.
  const ChatTemplate joins(
      "{%- for m in messages %}{{- m.role + ':' }}"
      "{%- for c in m.tool_calls or [] %}{{- c.function.name + '(' + c.function.arguments + ')' }}{%- endfor %}"
      "{{- (m.content or '') + '|' }}{%- endfor %}",
      J::object());
  const TemplateMessages prepare(joins);
  EXPECT_FALSE(prepare.arguments_as_objects);
  const J out = prepare.prepare(J::array({assistant_with(J::array({call("{\"a\": 1}")}))}));
  EXPECT_EQ(joins.render(out, nullptr, false), "assistant:f({\"a\": 1})|");
  EXPECT_TRUE(TemplateMessages(plain_template(false)).arguments_as_objects) << "a template that never reads them: objects, as vLLM passes";
}
