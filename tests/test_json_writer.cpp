#include "base/json_writer.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "json_syntax.hpp"

namespace cortiq {
namespace {

TEST(JsonWriter, CompactNesting) {
  JsonWriter json;
  json.begin_object();
  json.key("name").value("llama");
  json.key("shape").begin_array().value(int64_t{4096}).value(uint64_t{32000}).end_array();
  json.key("empty").begin_object().end_object();
  json.key("list").begin_array().end_array();
  json.key("ok").value(true).key("none").null();
  json.end_object();
  EXPECT_TRUE(json.complete());
  EXPECT_EQ(json.text(),
            R"({"name":"llama","shape":[4096,32000],"empty":{},"list":[],"ok":true,"none":null})");
}

TEST(JsonWriter, PrettyPrintParses) {
  JsonWriter json(2);
  json.begin_object().key("a").begin_array().value(1.5).value("x").end_array().end_object();
  EXPECT_EQ(json.text(), "{\n  \"a\": [\n    1.5,\n    \"x\"\n  ]\n}");
  EXPECT_TRUE(test::JsonSyntax::valid(json.text()));
}

TEST(JsonWriter, EscapesStrings) {
  EXPECT_EQ(JsonWriter::quote("a\"b\\c"), R"("a\"b\\c")");
  EXPECT_EQ(JsonWriter::quote("line\nnext\ttab\r\b\f"), R"("line\nnext\ttab\r\b\f")");
  EXPECT_EQ(JsonWriter::quote(std::string_view("\x01\x1f\x7f", 3)), R"("\u0001\u001f\u007f")");
  EXPECT_EQ(JsonWriter::quote(std::string_view("nul\0x", 5)), R"("nul\u0000x")");
  // Valid UTF-8 passes through; "/" needs no escape.
  EXPECT_EQ(JsonWriter::quote("▁hi/ü"), "\"▁hi/ü\"");
}

TEST(JsonWriter, ReplacesInvalidUtf8) {
  const std::string replacement = "\xEF\xBF\xBD";
  EXPECT_EQ(JsonWriter::quote("a\xFF"
                              "b"),
            "\"a" + replacement + "b\"");
  EXPECT_EQ(JsonWriter::quote("\xE2\x96"), "\"" + replacement + replacement + "\"");  // truncated
  EXPECT_EQ(JsonWriter::quote("\xC0\xAF"), "\"" + replacement + replacement + "\"");  // overlong
  EXPECT_EQ(JsonWriter::quote("\xED\xA0\x80"),
            "\"" + replacement + replacement + replacement + "\"");
  EXPECT_TRUE(test::JsonSyntax::valid(JsonWriter::quote("\xFF\xFE\x80")));
}

TEST(JsonWriter, NumbersReadBack) {
  JsonWriter json;
  json.begin_array()
      .value(0.1)
      .value(1e-5f)
      .value(-2.0)
      .value(std::numeric_limits<int64_t>::min())
      .value(std::numeric_limits<uint64_t>::max())
      .value(std::nan(""))
      .value(std::numeric_limits<float>::infinity())
      .end_array();
  EXPECT_EQ(json.text(), "[0.1,1e-05,-2,-9223372036854775808,18446744073709551615,null,null]");
  EXPECT_TRUE(test::JsonSyntax::valid(json.text()));
}

TEST(JsonWriter, MisuseThrows) {
  JsonWriter a;
  a.begin_object();
  EXPECT_THROW(a.value(1), std::logic_error);  // no key
  JsonWriter b;
  b.begin_array();
  EXPECT_THROW(b.key("x"), std::logic_error);
  EXPECT_THROW(b.end_object(), std::logic_error);
  JsonWriter c;
  c.value(1);
  EXPECT_THROW(c.value(2), std::logic_error);  // two roots
}

TEST(JsonSyntax, RejectsBrokenDocuments) {
  EXPECT_TRUE(test::JsonSyntax::valid(R"({"a": [1, -2.5e3, true, null, "x\u00e9"]})"));
  EXPECT_FALSE(test::JsonSyntax::valid(R"({"a": [1, 2,]})"));
  EXPECT_FALSE(test::JsonSyntax::valid(R"({"a" 1})"));
  EXPECT_FALSE(test::JsonSyntax::valid("\"tab\there\""));
  EXPECT_FALSE(test::JsonSyntax::valid("[01]"));
  EXPECT_FALSE(test::JsonSyntax::valid("{} {}"));
}

}  // namespace
}  // namespace cortiq
