// JSON Schema to grammar (src/grammar/json_schema.hpp): integer ranges
// against arithmetic on every number near them, regex patterns against
// std::regex on every short string, schemas accepting the JSON they allow
// and refusing what they do not, and the errors for what a grammar cannot
// express. tests/server/json-schema.test.mjs checks seeded generations
// with a standard validator (ajv).
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "cortiq/cortiq.hpp"
#include "grammar/gbnf_parser.hpp"
#include "grammar/grammar_matcher.hpp"
#include "grammar/integer_range.hpp"
#include "grammar/json_schema.hpp"
#include "grammar/regex_gbnf.hpp"

namespace cortiq::grammar {
namespace {

using GrammarPtr = std::shared_ptr<const CompiledGrammar>;

bool matches(const GrammarPtr& grammar, std::string_view text) {
  GrammarMatcher matcher(grammar);
  return matcher.accept(text) && matcher.can_end();
}

GrammarPtr range_grammar(std::optional<int64_t> lo, std::optional<int64_t> hi) {
  return std::make_shared<const CompiledGrammar>(
      parse_gbnf("root ::= " + integer_range_gbnf(lo, hi)));
}

TEST(IntegerRange, MatchesExactlyTheNumbersInRange) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> bound(-300, 300);
  for (int round = 0; round < 60; ++round) {
    int a = bound(rng), b = bound(rng);
    if (a > b) std::swap(a, b);
    std::optional<int64_t> lo = a, hi = b;
    if (round % 10 == 1) lo.reset();
    if (round % 10 == 2) hi.reset();
    const GrammarPtr g = range_grammar(lo, hi);
    for (int n = -1200; n <= 1200; ++n) {
      const bool inside = (!lo || n >= *lo) && (!hi || n <= *hi);
      ASSERT_EQ(matches(g, std::to_string(n)), inside)
          << n << " in [" << (lo ? std::to_string(*lo) : "-inf") << ", "
          << (hi ? std::to_string(*hi) : "inf") << "]";
    }
    for (const char* odd : {"-0", "00", "+1", "01", "-01", "", "-"}) {
      EXPECT_FALSE(matches(g, odd)) << odd;
    }
  }
}

TEST(IntegerRange, HandlesEighteenDigitBounds) {
  const int64_t big = 100'000'000'000'000'000;  // 10^17
  const GrammarPtr g = range_grammar(big - 3, kIntegerRangeLimit);
  EXPECT_TRUE(matches(g, std::to_string(big - 3)));
  EXPECT_TRUE(matches(g, std::to_string(big)));
  EXPECT_TRUE(matches(g, "999999999999999999"));
  EXPECT_FALSE(matches(g, std::to_string(big - 4)));
  EXPECT_FALSE(matches(g, "1000000000000000000"));  // 19 digits
  const GrammarPtr unbounded = range_grammar(std::nullopt, std::nullopt);
  EXPECT_TRUE(matches(unbounded, "-999999999999999999"));
  EXPECT_TRUE(matches(unbounded, "0"));
  EXPECT_FALSE(matches(unbounded, "-0"));
}

// --- patterns ---------------------------------------------------------------

GrammarPtr pattern_grammar(std::string_view pattern) {
  const std::string gbnf =
      "root ::= \"\\\"\" " + json_string_pattern_gbnf(pattern, "char") +
      " \"\\\"\"\n"
      R"(char ::= [^"\\\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} ))";
  return std::make_shared<const CompiledGrammar>(parse_gbnf(gbnf));
}

// Every string of the alphabet up to `length` characters.
std::vector<std::string> all_strings(std::string_view alphabet, size_t length) {
  std::vector<std::string> out = {""};
  for (size_t begin = 0, n = 0; n < length; ++n) {
    const size_t end = out.size();
    for (size_t i = begin; i < end; ++i) {
      for (const char c : alphabet) out.push_back(out[i] + c);
    }
    begin = end;
  }
  return out;
}

TEST(RegexPattern, AgreesWithStdRegexOnEveryShortString) {
  const char* patterns[] = {
      "^a+b?$",
      "a|b1",
      "^(ab|ba){1,2}$",
      "[a-c]\\d",
      "^[^a]*$",
      "^.{2}$",
      "^a*?b$",
      "\\w+\\.",
      "^(?:a|b)+-(?<n>\\d){2}$",
      "^[\\w-]{3,}$",
      "^\\D\\S?$",
      "b$",
      "^$",
      "^a{0,2}1?$|^-$",
      "^(a(b)?)+$",
      "^[.-]+[^.b-]?$",
      "^a{2,}$",
      "1\\.\\-",
      "^(|a|bb)$",
  };
  const std::vector<std::string> texts = all_strings("ab1-.", 5);
  for (const char* pattern : patterns) {
    const GrammarPtr g = pattern_grammar(pattern);
    // std::regex has no named groups: (?<n>...) is a plain group to it.
    const std::string plain = std::regex_replace(pattern, std::regex(R"(\(\?<\w+>)"), "(");
    const std::regex re(plain, std::regex::ECMAScript);
    for (const std::string& text : texts) {
      ASSERT_EQ(matches(g, "\"" + text + "\""), std::regex_search(text, re))
          << "pattern " << pattern << " on \"" << text << "\"";
    }
  }
}

TEST(RegexPattern, WritesTheCharactersJsonEscapes) {
  // The value a"b\ is written "a\"b\\" in JSON.
  const GrammarPtr quote = pattern_grammar(R"(^a"b\\$)");
  EXPECT_TRUE(matches(quote, R"("a\"b\\")"));
  EXPECT_FALSE(matches(quote, R"("a"b\")"));
  const GrammarPtr line = pattern_grammar(R"(^x\sy$)");
  EXPECT_TRUE(matches(line, R"("x y")"));
  EXPECT_TRUE(matches(line, R"("x\ny")"));
  EXPECT_TRUE(matches(line, R"("x\ty")"));
  EXPECT_FALSE(matches(line, "\"x\ny\""));  // a raw newline is not JSON
  const GrammarPtr any = pattern_grammar("^.$");
  EXPECT_TRUE(matches(any, R"("\"")"));
  EXPECT_TRUE(matches(any, "\"\xC3\xA9\""));  // é
  EXPECT_FALSE(matches(any, R"("\n")"));      // "." is not a line terminator
}

std::string pattern_error(std::string_view pattern) {
  try {
    json_string_pattern_gbnf(pattern, "char");
  } catch (const Error& e) {
    return e.what();
  }
  return "(converted)";
}

TEST(RegexPattern, NamesWhatAGrammarCannotExpress) {
  EXPECT_NE(pattern_error("^a(?=b)").find("lookahead"), std::string::npos)
      << pattern_error("^a(?=b)");
  EXPECT_NE(pattern_error("(a)\\1").find("backreference"), std::string::npos)
      << pattern_error("(a)\\1");
  EXPECT_NE(pattern_error("\\bword").find("word boundaries"), std::string::npos)
      << pattern_error("\\bword");
  EXPECT_NE(pattern_error("[a-").find("offset"), std::string::npos) << pattern_error("[a-");
  EXPECT_NE(pattern_error("a{3,1}").find("offset"), std::string::npos) << pattern_error("a{3,1}");
}

// --- schemas ----------------------------------------------------------------

struct Case {
  const char* schema;
  std::vector<const char*> accepted;
  std::vector<const char*> refused;
};

void check(const Case& c) {
  SCOPED_TRACE(c.schema);
  GrammarPtr g;
  ASSERT_NO_THROW(g = compile_json_schema(c.schema)) << json_schema_to_gbnf(c.schema);
  for (const char* text : c.accepted) EXPECT_TRUE(matches(g, text)) << "should accept " << text;
  for (const char* text : c.refused) EXPECT_FALSE(matches(g, text)) << "should refuse " << text;
}

TEST(JsonSchema, Primitives) {
  check({R"({"type": "string"})",
         {R"("")", R"("a b\n\u00e9")", "\"\xC3\xA9\""},
         {"1", R"("a)", "\"\n\""}});
  check({R"({"type": "integer"})",
         {"0", "-12", "999999999999999999"},
         {"1.5", "01", "1e3", R"("1")"}});
  check({R"({"type": "number"})", {"0", "-1.25", "3e10", "2.5E-3"}, {".5", "1.", "+1", "0x1"}});
  check({R"({"type": "boolean"})", {"true", "false"}, {"null", "1"}});
  check({R"({"type": "null"})", {"null"}, {"false"}});
  check({R"({"type": ["integer", "null"]})", {"3", "null"}, {"true", "1.5"}});
  check({"{}", {"1", R"({"a": [true, null, "x"]})", "[]"}, {"", "tru"}});
  check({"true", {"1", "{}"}, {}});
}

TEST(JsonSchema, ObjectsKeepTheirMembers) {
  const char* person = R"({"type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0, "maximum": 150}},
    "required": ["name"]})";
  check({person,
         {R"({"name":"x"})", R"({"name": "x", "age": 30})",
          "{\n  \"name\": \"x\",\n  \"age\": 150\n}"},
         {"{}", R"({"age": 3})", R"({"name": "x", "age": 151})", R"({"name": "x", "age": -1})",
          R"({"name": "x", "other": 1})", R"({"name": 1})"}});
  // additionalProperties: true lets other keys follow, never a declared one.
  check({R"({"properties": {"a": {"type": "integer"}}, "additionalProperties": true})",
         {"{}", R"({"a": 1})", R"({"a": 1, "b": [2], "ab": null})", R"({"b": 2})", R"({"": 0})"},
         {R"({"a": 1, "a": 2})", R"({"a": "x"})",
          ("{\"" + std::string(65, 'k') + "\": 1}").c_str()}});
  // Undeclared keys of up to 64 characters, declared ones of any length.
  const std::string long_name(70, 'n');
  const std::string long_schema =
      R"({"properties": {")" + long_name + R"(": {"type": "null"}}, "additionalProperties": true})";
  check({long_schema.c_str(),
         {("{\"" + long_name + "\": null}").c_str(),
          ("{\"" + std::string(64, 'n') + "\": 1}").c_str(),
          ("{\"" + std::string(63, 'n') + "x\": 1}").c_str()},
         {("{\"" + long_name + "\": 1}").c_str(),
          ("{\"" + std::string(65, 'm') + "\": 1}").c_str()}});
  check({R"({"type": "object", "additionalProperties": {"type": "integer"}})",
         {"{}", R"({"x": 1, "y": 2})"},
         {R"({"x": "1"})"}});
  check({R"({"type": "object", "properties": {"a": {"const": 1}}, "required": ["a", "b"]})",
         {R"({"a": 1, "b": {"c": []}})"},
         {R"({"a": 1})", R"({"a": 2, "b": 1})"}});
  // Property counts: the other members beside the required ones.
  check({R"({"properties": {"id": {"type": "integer"}}, "required": ["id"],
             "additionalProperties": {"type": "boolean"}, "minProperties": 2, "maxProperties": 3})",
         {R"({"id": 1, "a": true})", R"({"id": 1, "a": true, "b": false})"},
         {R"({"id": 1})", R"({"id": 1, "a": true, "b": false, "c": true})"}});
  check({R"({"type": "object", "maxProperties": 1})",
         {"{}", R"({"a": 1})"},
         {R"({"a": 1, "b": 2})"}});
  check({R"({"minProperties": 1})", {R"({"a": 1})"}, {"{}"}});
  // Nothing declared and nothing said: any object.
  check({R"({"type": "object"})", {"{}", R"({"k": {"n": [1, 2]}})"}, {"[]"}});
}

TEST(JsonSchema, Arrays) {
  check({R"({"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 3})",
         {"[1, 2]", "[1,2,3]"},
         {"[]", "[1]", "[1, 2, 3, 4]", R"([1, "2"])"}});
  check({R"({"type": "array", "items": {"type": "string"}})",
         {"[]", R"(["a"])", R"(["a", "b", "c"])"},
         {"[1]"}});
  check({R"({"prefixItems": [{"type": "integer"}, {"type": "string"}], "items": false})",
         {"[]", "[1]", R"([1, "a"])"},
         {R"(["a"])", R"([1, "a", 2])"}});
  check({R"({"prefixItems": [{"type": "integer"}], "items": {"type": "boolean"}, "minItems": 2})",
         {"[1, true]", "[1, true, false]"},
         {"[1]", "[1, 2]"}});
  check({R"({"items": [{"type": "null"}], "additionalItems": false})",
         {"[]", "[null]"},
         {"[null, null]"}});
  check({R"({"type": "array", "maxItems": 0})", {"[]"}, {"[1]"}});
}

TEST(JsonSchema, StringsWithFormatsPatternsAndLengths) {
  check({R"({"type": "string", "minLength": 2, "maxLength": 3})",
         {R"("ab")", R"("a\nb")", "\"\xC3\xA9\xC3\xA9\""},
         {R"("a")", R"("abcd")"}});
  check({R"({"type": "string", "pattern": "^[A-Z]{2}-\\d{3}$"})",
         {R"("AB-123")"},
         {R"("AB-12")", R"("ab-123")"}});
  check({R"({"format": "date"})",
         {R"("2024-02-28")", R"("1999-12-31")"},
         {R"("2024-13-01")", R"("2024-04-31")"}});
  check({R"({"type": "string", "format": "date-time"})",
         {R"("2024-05-01T12:30:00Z")", R"("2024-05-01T23:59:59.123+02:00")"},
         {R"("2024-05-01 12:30:00Z")", R"("2024-05-01T24:00:00Z")"}});
  check(
      {R"({"format": "uuid"})", {R"("123e4567-e89b-12d3-a456-426614174000")"}, {R"("123e4567")"}});
  check({R"({"format": "email"})", {R"("a.b@example.com")"}, {R"("a@b")", R"("@example.com")"}});
  check({R"({"format": "ipv4"})", {R"("192.168.0.1")"}, {R"("256.1.1.1")", R"("1.2.3")"}});
  check({R"({"format": "time"})", {R"("08:15:00Z")"}, {R"("8:15:00Z")"}});
  check({R"({"format": "hostname"})", {R"("a-1.example.org")"}, {R"("-a.org")", R"("a_b")"}});
}

TEST(JsonSchema, NumberBounds) {
  check({R"({"type": "integer", "exclusiveMinimum": 0, "maximum": 10})",
         {"1", "10"},
         {"0", "11", "-1"}});
  check(
      {R"({"type": "integer", "minimum": 5, "exclusiveMinimum": true})", {"6"}, {"5"}});  // draft 4
  check({R"({"type": "number", "minimum": -1.5, "exclusiveMaximum": 2})",
         {"-1", "0", "0.5", "1.99", "1"},
         {"2", "2.0", "-2", "-1.6", "1e1"}});
  check({R"({"type": "integer", "minimum": 2.5})", {"3"}, {"2"}});
}

TEST(JsonSchema, EnumConstAndAlternatives) {
  check({R"({"enum": ["red", "green", 3, null, {"a": [1]}]})",
         {R"("red")", "3", "null", R"({"a":[1]})"},
         {R"("blue")", "4", R"({"a": [2]})"}});
  check({R"({"const": "x\"y"})", {R"("x\"y")"}, {R"("x")"}});
  check({R"({"anyOf": [{"type": "integer"}, {"type": "string", "maxLength": 1}]})",
         {"1", R"("a")"},
         {R"("ab")", "true"}});
  check({R"({"oneOf": [{"type": "boolean"}, {"type": "null"}]})", {"true", "null"}, {"0"}});
  // Keywords beside anyOf apply to every option.
  check({R"({"type": "object", "properties": {"k": {"type": "string"}}, "required": ["k"],
             "anyOf": [{"properties": {"n": {"type": "integer"}}}, {"properties": {"b": {"type": "boolean"}}}]})",
         {R"({"k": "x"})", R"({"k": "x", "n": 1})", R"({"k": "x", "b": true})"},
         {R"({"n": 1})", R"({"k": "x", "n": true})"}});
}

TEST(JsonSchema, ReferencesAndAllOf) {
  const char* tree = R"({"$defs": {"node": {"type": "object",
      "properties": {"value": {"type": "integer"}, "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
      "required": ["value"]}}, "$ref": "#/$defs/node"})";
  check({tree,
         {R"({"value": 1})",
          R"({"value": 1, "children": [{"value": 2, "children": [{"value": 3}]}]})"},
         {R"({"value": 1, "children": [{}]})", R"({"children": []})"}});
  check(
      {R"({"definitions": {"a/b": {"type": "integer"}}, "type": "array", "items": {"$ref": "#/definitions/a~1b"}})",
       {"[1]"},
       {R"(["1"])"}});
  check(
      {R"({"allOf": [{"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
                        {"properties": {"b": {"type": "string"}}, "required": ["b"]},
                        {"properties": {"a": {"minimum": 0}}}]})",
       {R"({"a": 1, "b": "x"})"},
       {R"({"a": 1})", R"({"a": -1, "b": "x"})"}});
  check(
      {R"({"$defs": {"n": {"type": "number"}}, "$ref": "#/$defs/n", "type": "integer", "maximum": 3})",
       {"3", "-4"},
       {"4", "1.5"}});
  // A reference to the whole schema.
  check({R"({"type": "array", "items": {"$ref": "#"}, "maxItems": 2})",
         {"[]", "[[], [[]]]"},
         {"[1]"}});
}

std::string schema_error(std::string_view schema) {
  try {
    json_schema_to_gbnf(schema);
  } catch (const Error& e) {
    return e.what();
  }
  return "(converted)";
}

TEST(JsonSchema, NamesWhatItCannotExpress) {
  struct Expected {
    const char* schema;
    const char* message;
  };
  const Expected cases[] = {
      {R"({"not": {"type": "string"}})", "JSON schema at the top: \"not\" cannot be expressed"},
      {R"({"properties": {"a": {"type": "integer", "multipleOf": 3}}})",
       "at /properties/a: \"multipleOf\""},
      {R"({"type": "array", "uniqueItems": true})", "\"uniqueItems\""},
      {R"({"patternProperties": {"^x": {}}})", "\"patternProperties\""},
      {R"({"type": "string", "format": "uri"})", "at /format: format \"uri\" is not supported"},
      {R"({"$ref": "#/$defs/missing"})", "\"#/$defs/missing\" does not resolve"},
      {R"({"$ref": "https://example.com/s.json"})", "only references inside the schema"},
      {R"({"type": "strnig"})", "unknown type \"strnig\""},
      {R"j({"type": "string", "pattern": "(?=a)"})j", "at /pattern: "},
      {R"({"type": "integer", "minimum": 5, "maximum": 4})", "no integer lies between"},
      {R"({"type": "array", "minItems": 3, "maxItems": 1})", "maxItems is below minItems"},
      {R"({"allOf": [{"type": "string"}, {"type": "integer"}]})", "nothing in common"},
      {R"({"properties": {"a": false}, "required": ["a"]})", "at /properties/a: a required member"},
      {R"({"properties": {"a": {}}, "required": ["b"], "additionalProperties": false})",
       "\"b\" is required but"},
      {R"({"enum": []})", "enum must be a non-empty array"},
      {R"({"properties": {"a": {}}, "maxProperties": 1})", "beside optional properties"},
      {R"({"properties": {"a": {}}, "required": ["a"], "additionalProperties": false, "minProperties": 2})",
       "minProperties asks for more members"},
      {R"({"type": "object", "properties": {"a": 1)", "JSON schema: "},
  };
  for (const Expected& c : cases) {
    const std::string error = schema_error(c.schema);
    EXPECT_NE(error.find(c.message), std::string::npos) << c.schema << "\n  gave: " << error;
  }
}

TEST(JsonSchema, GrammarStaysSmallForWideSchemas) {
  // Twenty optional members: one rule per member and position, not one per subset.
  std::string schema = R"({"type": "object", "properties": {)";
  for (int i = 0; i < 20; ++i)
    schema +=
        (i ? ", " : "") + std::string("\"p") + std::to_string(i) + "\": {\"type\": \"integer\"}";
  schema += "}}";
  const std::string gbnf = json_schema_to_gbnf(schema);
  EXPECT_LT(gbnf.size(), 12000u) << gbnf;
  const GrammarPtr g = compile_json_schema(schema);
  EXPECT_TRUE(matches(g, R"({"p3": 1, "p17": 2})"));
  EXPECT_FALSE(matches(g, R"({"p17": 2, "p3": 1})"));  // in declaration order
}

}  // namespace
}  // namespace cortiq::grammar
