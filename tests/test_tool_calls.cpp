// Tool calls (src/chat/tool_calls.hpp): the syntax read off real chat
// templates, each syntax's parser on replies with text and calls, what is
// left as text (a call cut off, arguments that are not an object), and the
// grammar of a required call: a call it accepts parses back to itself.
#include <gtest/gtest.h>

#include <fstream>
#include <memory>
#include <sstream>

#include "base/error.hpp"
#include "chat/chat_template.hpp"
#include "chat/tool_calls.hpp"
#include "cortiq/cortiq.hpp"
#include "grammar/grammar_matcher.hpp"
#include "test_support.hpp"

namespace cortiq {
namespace {

ToolCall call(std::string name, std::string arguments, std::string id = "") {
  return {std::move(name), std::move(arguments), std::move(id)};
}

void expect_parse(ToolCallSyntax syntax, std::string_view reply, std::string_view content,
                  const std::vector<ToolCall>& calls) {
  const ParsedReply parsed = parse_tool_calls(syntax, reply);
  EXPECT_EQ(parsed.content, content) << tool_call_syntax_name(syntax) << ": " << reply;
  EXPECT_EQ(parsed.calls, calls) << tool_call_syntax_name(syntax) << ": " << reply;
}

TEST(ToolCalls, SyntaxIsReadOffTheTemplate) {
  CORTIQ_REQUIRE_SHARED_DATA();
  const auto dir = test::shared_data_dir() / "chat-templates";
  const std::pair<const char*, ToolCallSyntax> cases[] = {
      {"Qwen-Qwen2.5-7B-Instruct.jinja", ToolCallSyntax::hermes},
      {"Qwen-Qwen3-0.6B.jinja", ToolCallSyntax::hermes},
      {"NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja", ToolCallSyntax::hermes},
      {"meta-llama-Llama-3.1-8B-Instruct.jinja", ToolCallSyntax::llama3},
      {"meta-llama-Llama-3.3-70B-Instruct.jinja", ToolCallSyntax::llama3},
      {"mistralai-Mistral-Nemo-Instruct-2407.jinja", ToolCallSyntax::mistral},
      {"Mistral-Small-3.2-24B-Instruct-2506.jinja", ToolCallSyntax::mistral_args},
      {"openai-gpt-oss-120b.jinja", ToolCallSyntax::gpt_oss},
      {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", ToolCallSyntax::deepseek},
      {"deepseek-ai-DeepSeek-V3.1.jinja", ToolCallSyntax::deepseek},
      {"meetkai-functionary-medium-v3.1.jinja", ToolCallSyntax::functionary_v3_1},
      {"meetkai-functionary-medium-v3.2.jinja", ToolCallSyntax::functionary_v3_2},
      {"CohereForAI-c4ai-command-r-plus-tool_use.jinja", ToolCallSyntax::command_r},
      {"CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja", ToolCallSyntax::command_r7b},
      {"google-gemma-2-2b-it.jinja", ToolCallSyntax::none},
  };
  for (const auto& [file, syntax] : cases) {
    std::ifstream in(dir / file);
    ASSERT_TRUE(in) << file;
    std::stringstream source;
    source << in.rdbuf();
    EXPECT_EQ(tool_call_syntax_name(detect_tool_call_syntax(source.str())),
              tool_call_syntax_name(syntax))
        << file;
  }
}

TEST(ToolCalls, ArgumentsGoToTemplatesThatEncodeThemAsObjects) {
  // Encodes them itself: wants the object.
  EXPECT_TRUE(template_wants_object_arguments(
      ChatTemplate("{% for m in messages %}{% for c in m.tool_calls or [] %}{{ "
                   "c.function.arguments | tojson }}{% endfor %}{% "
                   "endfor %}")));
  // Writes them as they come: keeps the text.
  EXPECT_FALSE(template_wants_object_arguments(
      ChatTemplate("{% for m in messages %}{% for c in m.tool_calls or [] %}{{ "
                   "c.function.arguments }}{% endfor %}{% endfor %}")));
  // Shows no calls at all.
  EXPECT_FALSE(template_wants_object_arguments(ChatTemplate(std::string(chatml_template()))));
  if (test::shared_data_dir().empty()) return;
  const auto dir = test::shared_data_dir() / "chat-templates";
  const std::pair<const char*, bool> cases[] = {
      {"Qwen-Qwen2.5-7B-Instruct.jinja", true},
      {"meta-llama-Llama-3.1-8B-Instruct.jinja", true},
      {"mistralai-Mistral-Nemo-Instruct-2407.jinja", true},
      {"meetkai-functionary-medium-v3.2.jinja", false},
  };
  for (const auto& [file, wants] : cases) {
    std::ifstream in(dir / file);
    ASSERT_TRUE(in) << file;
    std::stringstream source;
    source << in.rdbuf();
    EXPECT_EQ(template_wants_object_arguments(ChatTemplate(source.str())), wants) << file;
  }
}

TEST(ToolCalls, Hermes) {
  const auto s = ToolCallSyntax::hermes;
  expect_parse(s,
               "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
               "\"Paris\"}}\n</tool_call>",
               "Let me check.", {call("get_weather", R"({"city":"Paris"})")});
  expect_parse(
      s,
      "<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call>\n<tool_call>\n{\"name\": \"b\", "
      "\"arguments\": \"{\\\"x\\\": [1, 2]}\"}\n</tool_call>",
      "", {call("a", "{}"), call("b", R"({"x":[1,2]})")});
  // Cut off after the JSON, before the closing tag: still a call.
  expect_parse(s, "<tool_call>\n{\"name\": \"a\", \"arguments\": {\"n\": 1}}", "",
               {call("a", R"({"n":1})")});
  // Cut off inside the JSON, or arguments that are not an object: text.
  expect_parse(s, "<tool_call>\n{\"name\": \"a\", \"argum",
               "<tool_call>\n{\"name\": \"a\", \"argum", {});
  expect_parse(s, "<tool_call>{\"name\": \"a\", \"arguments\": 3}</tool_call>",
               "<tool_call>{\"name\": \"a\", \"arguments\": 3}</tool_call>", {});
  expect_parse(s, "  Just text.  ", "Just text.", {});
}

TEST(ToolCalls, Llama3) {
  const auto s = ToolCallSyntax::llama3;
  expect_parse(s, R"({"name": "get_weather", "parameters": {"city": "Paris", "days": 2}})", "",
               {call("get_weather", R"({"city":"Paris","days":2})")});
  expect_parse(
      s,
      R"(<|python_tag|>{"type": "function", "name": "f", "parameters": {}}; {"name": "g", "parameters": {"a": null}})",
      "", {call("f", "{}"), call("g", R"({"a":null})")});
  expect_parse(s, "The weather is {\"name\": fine}", "The weather is {\"name\": fine}", {});
  expect_parse(s, R"({"not a call": 1})", R"({"not a call": 1})", {});
}

TEST(ToolCalls, Mistral) {
  expect_parse(
      ToolCallSyntax::mistral,
      R"([TOOL_CALLS][{"name": "f", "arguments": {"q": "x"}, "id": "abcDEF123"}, {"name": "g", "arguments": {}}])",
      "", {call("f", R"({"q":"x"})", "abcDEF123"), call("g", "{}")});
  expect_parse(ToolCallSyntax::mistral_args,
               R"(Sure.[TOOL_CALLS]get_weather[ARGS]{"city": "Oslo"}[TOOL_CALLS]g[ARGS]{})",
               "Sure.", {call("get_weather", R"({"city":"Oslo"})"), call("g", "{}")});
  expect_parse(ToolCallSyntax::mistral_args, R"([TOOL_CALLS]f[CALL_ID]a1b2c3d4e[ARGS]{"n": 1})", "",
               {call("f", R"({"n":1})", "a1b2c3d4e")});
  expect_parse(ToolCallSyntax::mistral_args, "[TOOL_CALLS]f{\"n\": 1}", "[TOOL_CALLS]f{\"n\": 1}",
               {});
}

TEST(ToolCalls, GptOss) {
  const auto s = ToolCallSyntax::gpt_oss;
  expect_parse(s,
               "<|channel|>analysis<|message|>Need the "
               "weather.<|end|><|start|>assistant<|channel|>commentary "
               "to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Rome\"}<|call|>",
               "", {call("get_weather", R"({"city":"Rome"})")});
  expect_parse(s, " to=functions.f<|channel|>commentary json<|message|>{}<|call|>", "",
               {call("f", "{}")});
  expect_parse(s,
               "<|channel|>analysis<|message|>Thinking.<|end|><|start|>assistant<|channel|>final<|"
               "message|>Hello!<|return|>",
               "Hello!", {});
  expect_parse(s, "Plain words", "Plain words", {});
}

TEST(ToolCalls, DeepSeek) {
  const auto s = ToolCallSyntax::deepseek;
  expect_parse(s,
               "On "
               "it.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n``"
               "`json\n{\"city\": "
               "\"Lima\"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
               "On it.", {call("get_weather", R"({"city":"Lima"})")});
  expect_parse(s,
               "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>{\"a\": "
               "1}<｜tool▁call▁end｜><｜tool▁call▁begin｜>g<｜"
               "tool▁sep｜>{}<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
               "", {call("f", R"({"a":1})"), call("g", "{}")});
}

TEST(ToolCalls, Functionary) {
  expect_parse(ToolCallSyntax::functionary_v3_1,
               R"(Checking <function=get_weather>{"city": "Kyiv"}</function>)", "Checking",
               {call("get_weather", R"({"city":"Kyiv"})")});
  expect_parse(ToolCallSyntax::functionary_v3_2,
               "get_weather\n{\"city\": \"Quito\"}>>>all\nOne moment.", "One moment.",
               {call("get_weather", R"({"city":"Quito"})")});
  expect_parse(ToolCallSyntax::functionary_v3_2, "all\nHello there.", "Hello there.", {});
  expect_parse(ToolCallSyntax::functionary_v3_2, "f\n{}>>>g\n{\"x\": true}", "",
               {call("f", "{}"), call("g", R"({"x":true})")});
}

TEST(ToolCalls, CommandR) {
  expect_parse(ToolCallSyntax::command_r,
               "Action: ```json\n[\n    {\n        \"tool_name\": \"internet_search\",\n        "
               "\"parameters\": {\"query\": "
               "\"tides\"}\n    }\n]\n```",
               "", {call("internet_search", R"({"query":"tides"})")});
  expect_parse(ToolCallSyntax::command_r,
               "Action: ```json\n[{\"tool_name\": \"directly-answer\", \"parameters\": {}}]\n```",
               "", {});
  expect_parse(ToolCallSyntax::command_r7b,
               "<|START_THINKING|>I will search.<|END_THINKING|><|START_ACTION|>[\n    "
               "{\"tool_call_id\": \"0\", "
               "\"tool_name\": \"search\", \"parameters\": {\"q\": \"x\"}}\n]<|END_ACTION|>",
               "", {call("search", R"({"q":"x"})", "0")});
  expect_parse(ToolCallSyntax::command_r7b, "<|START_RESPONSE|>Hi!<|END_RESPONSE|>", "Hi!", {});
}

// A required call: the grammar accepts the syntax's call to each tool with
// arguments its schema allows (and refuses others), and what it accepts
// parses back to that call.
TEST(ToolCalls, RequiredCallGrammarAcceptsWhatParsesBack) {
  const std::vector<ToolSpec> tools = {
      {"get_weather",
       R"({"type": "object", "properties": {"city": {"type": "string", "maxLength": 10}}, "required": ["city"]})"},
      {"add",
       R"({"$defs": {"n": {"type": "integer"}}, "type": "object", "properties": {"a": {"$ref": "#/$defs/n"},
                "b": {"$ref": "#/$defs/n"}}, "required": ["a", "b"]})"}};
  struct Case {
    ToolCallSyntax syntax;
    std::string reply;    // a call to each tool
    std::string refused;  // wrong arguments
  };
  const Case cases[] = {
      {ToolCallSyntax::hermes,
       "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
       "\"Paris\"}}\n</tool_call>\n<tool_call>\n"
       "{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}\n</tool_call>",
       "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1}}\n</tool_call>"},
      {ToolCallSyntax::llama3, R"({"name": "add", "parameters": {"a": 1, "b": -2}})",
       R"({"name": "add", "parameters": {"a": "1", "b": 2}})"},
      {ToolCallSyntax::mistral,
       R"([TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Oslo"}}, {"name": "add", "arguments": {"a": 0, "b": 0}}])",
       R"([TOOL_CALLS][{"name": "sub", "arguments": {}}])"},
      {ToolCallSyntax::mistral_args,
       R"([TOOL_CALLS]get_weather[ARGS]{"city": "Oslo"}[TOOL_CALLS]add[ARGS]{"a": 1, "b": 2})",
       R"([TOOL_CALLS]get_weather[ARGS]{"city": "Llanfairpwllgwyngyll"})"},
      {ToolCallSyntax::gpt_oss,
       "<|channel|>commentary to=functions.add <|constrain|>json<|message|>{\"a\": 1, \"b\": "
       "2}<|call|>",
       "<|channel|>commentary to=functions.add <|constrain|>json<|message|>{}<|call|>"},
      {ToolCallSyntax::deepseek,
       "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>add\n```json\n{\"a\": 1, "
       "\"b\": 2}\n```<｜tool▁"
       "call▁end｜><｜tool▁calls▁end｜>",
       "<｜tool▁calls▁begin｜><｜tool▁calls▁end｜>"},
      {ToolCallSyntax::functionary_v3_1, R"(<function=add>{"a": 1, "b": 2}</function>)",
       R"(<function=add>{"a": 1}</function>)"},
      {ToolCallSyntax::functionary_v3_2,
       "get_weather\n{\"city\": \"Rome\"}>>>add\n{\"a\": 5, \"b\": 6}", "all\nhello"},
      {ToolCallSyntax::command_r,
       "Action: ```json\n[{\"tool_name\": \"add\", \"parameters\": {\"a\": 1, \"b\": 2}}]\n```",
       "Action: ```json\n[]\n```"},
      {ToolCallSyntax::command_r7b,
       R"(<|START_ACTION|>[{"tool_call_id": "0", "tool_name": "add", "parameters": {"a": 1, "b": 2}}]<|END_ACTION|>)",
       R"(<|START_ACTION|>[{"tool_name": "add", "parameters": {"a": 1, "b": 2}}]<|END_ACTION|>)"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(tool_call_syntax_name(c.syntax)));
    std::shared_ptr<const grammar::CompiledGrammar> g;
    ASSERT_NO_THROW(g = compile_grammar(tool_calls_gbnf(c.syntax, tools, true)))
        << tool_calls_gbnf(c.syntax, tools, true);
    grammar::GrammarMatcher accepts(g);
    EXPECT_TRUE(accepts.accept(c.reply) && accepts.can_end()) << c.reply;
    grammar::GrammarMatcher refuses(g);
    EXPECT_FALSE(refuses.accept(c.refused) && refuses.can_end()) << c.refused;
    const ParsedReply parsed = parse_tool_calls(c.syntax, c.reply);
    EXPECT_FALSE(parsed.calls.empty()) << c.reply;
    EXPECT_EQ(parsed.content, "");
    for (const ToolCall& made : parsed.calls) {
      EXPECT_TRUE(made.name == "get_weather" || made.name == "add") << made.name;
    }
  }
  // One call only without parallel calls.
  grammar::GrammarMatcher single(
      compile_grammar(tool_calls_gbnf(ToolCallSyntax::hermes, tools, false)));
  EXPECT_FALSE(single.accept(cases[0].reply) && single.can_end());
}

TEST(ToolCalls, RequiredCallErrorsNameTheTool) {
  const std::vector<ToolSpec> tools = {
      {"bad", R"({"type": "object", "properties": {"x": {"not": {}}}})"}};
  try {
    tool_calls_gbnf(ToolCallSyntax::hermes, tools, false);
    ADD_FAILURE() << "converted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "tool \"bad\": JSON schema at /properties/arguments/properties/x: \"not\""),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(tool_calls_gbnf(ToolCallSyntax::none, tools, false), Error);
}

}  // namespace
}  // namespace cortiq
