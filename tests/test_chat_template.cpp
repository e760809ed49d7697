// Chat templates of real models: every template in shared data renders a
// short conversation, and a set of well-known families match the output of
// real Jinja2 (tools/chat/make_template_goldens.py) byte for byte.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "base/error.hpp"
#include "base/json_parser.hpp"
#include "chat/chat_template.hpp"
#include "chat/jinja_json.hpp"
#include "test_support.hpp"

namespace cortiq {
namespace {

namespace fs = std::filesystem;

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// 2025-01-15 12:00:00 UTC, the clock the goldens were rendered with.
constexpr std::time_t kFixedNow = 1736942400;

constexpr std::string_view kConversation = R"([
  {"role": "system", "content": "You are a helpful assistant."},
  {"role": "user", "content": "Hello! What is 2+2?"},
  {"role": "assistant", "content": "2+2 equals 4."},
  {"role": "user", "content": "And 3*3?"}
])";

ChatInputs conversation_inputs(std::string_view json) {
  ChatInputs in;
  in.messages = messages_from_json(json);
  in.bos_token = "<s>";
  in.eos_token = "</s>";
  in.add_generation_prompt = true;
  in.now = kFixedNow;
  return in;
}

jinja::Value without_system(const jinja::Value& messages) {
  jinja::List out;
  for (const jinja::Value& m : messages.as_list())
    if (m.as_dict().find("role")->as_string() != "system") out.push_back(m);
  return jinja::Value(std::move(out));
}

TEST(ChatTemplate, ChatMLFallback) {
  ChatTemplate tmpl(chatml_template());
  std::string out = tmpl.render(conversation_inputs(kConversation));
  EXPECT_EQ(out,
            "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
            "<|im_start|>user\nHello! What is 2+2?<|im_end|>\n"
            "<|im_start|>assistant\n2+2 equals 4.<|im_end|>\n"
            "<|im_start|>user\nAnd 3*3?<|im_end|>\n"
            "<|im_start|>assistant\n");
}

TEST(ChatTemplate, ExtraVariablesAndTools) {
  ChatTemplate tmpl(
      "{% if enable_thinking is false %}no-think {% endif %}"
      "{% for t in tools %}{{ t.function.name }};{% endfor %}{{ messages | length }}");
  ChatInputs in = conversation_inputs(kConversation);
  in.extra.emplace_back("enable_thinking", jinja::Value(false));
  in.tools = messages_from_json(R"([{"type":"function","function":{"name":"get_weather"}}])");
  EXPECT_EQ(tmpl.render(in), "no-think get_weather;4");
}

TEST(ChatTemplate, FixedClock) {
  ChatTemplate tmpl("{{ strftime_now('%d %b %Y') }}");
  EXPECT_EQ(tmpl.render(conversation_inputs("[]")), "15 Jan 2025");
}

TEST(ChatTemplate, SyntaxErrorNamesLine) {
  try {
    ChatTemplate tmpl("line one\n{% if x %}\n{{ x | nosuchfilter }}\n{% endif %}");
    ChatInputs in;
    in.extra.emplace_back("x", jinja::Value(1));
    tmpl.render(in);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "template line 3: unknown filter 'nosuchfilter'");
  }
  EXPECT_THROW(ChatTemplate("{% for x in y %}"), Error);
}

TEST(ChatTemplate, RaiseExceptionSurfaces) {
  ChatTemplate tmpl("{{ raise_exception('System role not supported') }}");
  try {
    tmpl.render(ChatInputs{});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("System role not supported"), std::string::npos);
  }
}

TEST(ChatTemplate, MalformedMessagesJson) {
  EXPECT_THROW(messages_from_json("[{\"role\": }]"), Error);
  EXPECT_THROW(messages_from_json("[1, 2"), Error);
}

// Every real template renders the conversation. Templates that refuse a
// system message (raise_exception) are retried without it, and the few that
// need variables of their own (firefunction: `functions`, `datetime`; real
// Jinja2 fails without them too) get them.
TEST(ChatTemplate, AllSharedTemplatesRender) {
  CORTIQ_REQUIRE_SHARED_DATA();
  fs::path dir = test::shared_data_dir() / "chat-templates";
  if (!fs::exists(dir)) GTEST_SKIP() << dir << " not found";
  int rendered = 0;
  std::vector<std::string> failures;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() != ".jinja") continue;
    std::string name = entry.path().filename().string();
    try {
      ChatTemplate tmpl(read_text(entry.path()));
      ChatInputs in = conversation_inputs(kConversation);
      std::string out;
      try {
        out = tmpl.render(in);
      } catch (const Error&) {
        in.messages = without_system(in.messages);
        in.extra.emplace_back("functions", jinja::Value("[]"));
        in.extra.emplace_back("datetime", jinja::Value("2025-01-15"));
        out = tmpl.render(in);
      }
      EXPECT_NE(out.find("And 3*3?"), std::string::npos) << name;
      ++rendered;
    } catch (const Error& e) {
      failures.push_back(name + ": " + e.what());
    }
  }
  for (const auto& f : failures) ADD_FAILURE() << f;
  EXPECT_GT(rendered, 0);
  std::printf("rendered %d chat templates\n", rendered);
}

TEST(ChatTemplate, GoldensMatchJinja2) {
  CORTIQ_REQUIRE_SHARED_DATA();
  fs::path golden = test::golden_dir() / "chat";
  fs::path templates = test::shared_data_dir() / "chat-templates";
  if (!fs::exists(templates)) GTEST_SKIP() << templates << " not found";
  Json manifest = parse_json(read_text(golden / "manifest.json"));
  std::string conversation = read_text(golden / "conversation.json");
  ASSERT_GE(manifest.array.size(), 12u);
  for (const Json& entry : manifest.array) {
    std::string name = entry.find("name")->string;
    SCOPED_TRACE(name);
    ChatTemplate tmpl(read_text(templates / entry.find("template")->string));
    ChatInputs in = conversation_inputs(conversation);
    // Other conversations are objects: {"messages": [...], "tools": [...]}.
    if (std::string kind = entry.find("conversation")->string; kind != "basic") {
      Json other = parse_json(read_text(golden / ("conversation-" + kind + ".json")));
      in.messages = jinja::value_from_json(*other.find("messages"));
      if (const Json* tools = other.find("tools")) in.tools = jinja::value_from_json(*tools);
    }
    if (entry.find("no_system")->boolean) in.messages = without_system(in.messages);
    for (const auto& [key, value] : entry.find("extra")->object)
      in.extra.emplace_back(key, jinja::value_from_json(value));
    EXPECT_EQ(tmpl.render(in), read_text(golden / (name + ".txt")));
  }
}

}  // namespace
}  // namespace cortiq
