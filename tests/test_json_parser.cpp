// The strict JSON reader used for chat messages and request bodies.
#include <gtest/gtest.h>

#include <string>

#include "base/error.hpp"
#include "base/json_parser.hpp"

namespace cortiq {
namespace {

TEST(JsonParser, ReadsNestedDocumentsInOrder) {
  Json doc = parse_json(R"( {"b": [1, -2.5e3, true, false, null], "a": {"x": "y"}, "n": 0} )");
  ASSERT_EQ(doc.type, Json::Type::object);
  ASSERT_EQ(doc.object.size(), 3u);
  EXPECT_EQ(doc.object[0].first, "b");  // document order, not sorted
  EXPECT_EQ(doc.object[1].first, "a");
  const Json& b = *doc.find("b");
  EXPECT_EQ(b.array[0].type, Json::Type::integer);
  EXPECT_EQ(b.array[0].integer, 1);
  EXPECT_EQ(b.array[1].type, Json::Type::number);
  EXPECT_DOUBLE_EQ(b.array[1].number, -2500.0);
  EXPECT_TRUE(b.array[2].boolean);
  EXPECT_FALSE(b.array[3].boolean);
  EXPECT_EQ(b.array[4].type, Json::Type::null);
  EXPECT_EQ(doc.find("a")->find("x")->string, "y");
  EXPECT_EQ(doc.find("missing"), nullptr);
}

TEST(JsonParser, DecodesEscapes) {
  Json s = parse_json(R"("tab\t nl\n quote\" slash\/ e\u00e9 emoji\ud83d\ude00 lone\ud800")");
  EXPECT_EQ(s.string, "tab\t nl\n quote\" slash/ e\xC3\xA9 emoji\xF0\x9F\x98\x80 lone\xEF\xBF\xBD");
}

TEST(JsonParser, HugeIntegersBecomeNumbers) {
  Json n = parse_json("123456789012345678901234567890");
  EXPECT_EQ(n.type, Json::Type::number);
}

std::string error_of(std::string_view text) {
  try {
    parse_json(text);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(JsonParser, RejectsMalformedInput) {
  for (const char* bad : {"", "{", "[1,]", "{\"a\" 1}", "{'a': 1}", "01", "1.", "-", "tru",
                          "\"unterminated", "\"ctrl\x01\"", "[1] x", "{\"a\":1,}", "\"\\x\""}) {
    EXPECT_EQ(error_of(bad).rfind("JSON at offset ", 0), 0u) << bad;
  }
  EXPECT_EQ(error_of("[1, 2, }"), "JSON at offset 7: unexpected character '}'");
}

TEST(JsonParser, RefusesDeepNesting) {
  EXPECT_NE(error_of(std::string(100000, '[')).find("too deep"), std::string::npos);
}

}  // namespace
}  // namespace cortiq
