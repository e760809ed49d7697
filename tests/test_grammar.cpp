// The grammar engine: GBNF parsing and its errors, the matcher against
// std::regex on grammars both can write (randomized), UTF-8 split across
// bytes, and the token mask against feeding every token by itself.
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "grammar/gbnf_parser.hpp"
#include "grammar/grammar_matcher.hpp"
#include "grammar/token_mask.hpp"

namespace cortiq::grammar {
namespace {

std::shared_ptr<const CompiledGrammar> compile(std::string_view gbnf) {
  return std::make_shared<const CompiledGrammar>(parse_gbnf(gbnf));
}

// The whole text is a sentence of the grammar.
bool matches(const std::shared_ptr<const CompiledGrammar>& grammar, std::string_view text) {
  GrammarMatcher matcher(grammar);
  return matcher.accept(text) && matcher.can_end();
}

// A prefix of some sentence.
bool is_prefix(const std::shared_ptr<const CompiledGrammar>& grammar, std::string_view text) {
  GrammarMatcher matcher(grammar);
  return matcher.accept(text);
}

std::string parse_error(std::string_view gbnf) {
  try {
    parse_gbnf(gbnf);
  } catch (const Error& e) {
    return e.what();
  }
  return "(parsed)";
}

constexpr std::string_view kJson = R"(# JSON (RFC 8259) with an object at the top
root   ::= ws object ws
value  ::= object | array | string | number | "true" | "false" | "null"
object ::= "{" ws ( member ( ws "," ws member )* ws )? "}"
member ::= string ws ":" ws value
array  ::= "[" ws ( value ( ws "," ws value )* ws )? "]"

string ::= "\"" char* "\""
char   ::= [^"\\\x00-\x1F] |
           "\\" ( ["\\/bfnrt] | "u" hex hex hex hex )   # escapes
hex    ::= [0-9a-fA-F]

number ::= "-"? int frac? exp?
int    ::= "0" | [1-9] [0-9]*
frac   ::= "." [0-9]+
exp    ::= [eE] [-+]? [0-9]+
ws     ::= [ \t\n\r]*
)";

TEST(Gbnf, ParsesJsonAndMatchesItsSentences) {
  const auto json = compile(kJson);
  EXPECT_TRUE(matches(json, R"({})"));
  EXPECT_TRUE(matches(json, R"({"a": 1, "b": [true, null, "x\n\u00e9"], "c": {"d": -0.5e3}})"));
  EXPECT_TRUE(matches(json, "{\"k\": \"caf\xc3\xa9 \xf0\x9f\x98\x80\"}"));
  EXPECT_FALSE(matches(json, R"({"a": 1,})"));
  EXPECT_FALSE(matches(json, R"([1, 2])"));  // root is an object
  EXPECT_FALSE(matches(json, R"({"a": 01x})"));
  EXPECT_FALSE(matches(json, R"({"a" 1})"));
  // A prefix is alive but cannot end.
  EXPECT_TRUE(is_prefix(json, R"({"a": [1, 2)"));
  EXPECT_FALSE(matches(json, R"({"a": [1, 2)"));
  EXPECT_FALSE(is_prefix(json, R"({"a": ])"));
}

TEST(Gbnf, RepetitionCounts) {
  const auto g = compile(R"(root ::= "a"{2,4} "b"{3} "c"{2,} "d"{,1} ("xy"){0,2})");
  EXPECT_TRUE(matches(g, "aabbbcc"));
  EXPECT_TRUE(matches(g, "aaaabbbccccccdxyxy"));
  EXPECT_FALSE(matches(g, "abbbcc"));         // a{2,4}
  EXPECT_FALSE(matches(g, "aaaaabbbcc"));     // a{2,4}
  EXPECT_FALSE(matches(g, "aabbcc"));         // b{3}
  EXPECT_FALSE(matches(g, "aabbbc"));         // c{2,}
  EXPECT_FALSE(matches(g, "aabbbccdd"));      // d{,1}
  EXPECT_FALSE(matches(g, "aabbbccxyxyxy"));  // ("xy"){0,2}
  EXPECT_FALSE(matches(g, "aabbbccx"));
  const auto ops = compile(R"(root ::= "a"? "b"+ "c"*)");
  EXPECT_TRUE(matches(ops, "b"));
  EXPECT_TRUE(matches(ops, "abbbccc"));
  EXPECT_FALSE(matches(ops, "ac"));
  EXPECT_FALSE(matches(ops, "aab"));
}

TEST(Gbnf, CharacterClassesEscapesAndAnyCharacter) {
  const auto g = compile(R"(root ::= [a-cx] [^0-9\n] [\x41-\x43] "\u00e9\t\"\\" . [α-ω]+)");
  EXPECT_TRUE(matches(g, "x!B\xc3\xa9\t\"\\\xf0\x9f\x98\x80\xce\xb1\xce\xb2"));
  EXPECT_FALSE(matches(g, "d!B\xc3\xa9\t\"\\z\xce\xb1"));  // [a-cx]
  EXPECT_FALSE(matches(g, "a5B\xc3\xa9\t\"\\z\xce\xb1"));  // [^0-9\n]
  EXPECT_FALSE(matches(g, "a!D\xc3\xa9\t\"\\z\xce\xb1"));  // [\x41-\x43]
  EXPECT_FALSE(matches(g, "a!B\xc3\xa9\t\"\\zab"));        // [α-ω]+
  // Comments, a rule over several lines in parentheses and after "|".
  const auto lines =
      compile("# a comment\nroot ::= (\n  \"a\"   # first\n  | \"b\"\n) |\n  \"c\"\n\n  # done\n");
  EXPECT_TRUE(matches(lines, "a"));
  EXPECT_TRUE(matches(lines, "b"));
  EXPECT_TRUE(matches(lines, "c"));
  EXPECT_FALSE(matches(lines, "ab"));
  // An empty alternative and the empty literal.
  const auto empty = compile("root ::= \"\" | \"a\" x\nx ::= | \"b\"");
  EXPECT_TRUE(matches(empty, ""));
  EXPECT_TRUE(matches(empty, "a"));
  EXPECT_TRUE(matches(empty, "ab"));
}

TEST(Gbnf, RefusesWithTheLineAndTheProblem) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"root ::= value", "rule 'value' is used but never defined"},
      {"start ::= \"a\"", "the grammar has no 'root' rule"},
      {"root ::= \"a\"\nroot ::= \"b\"",
       "line 2, column 1: rule 'root' is defined twice (first at line 1)"},
      {"root ::= \"abc", "line 1, column 10: unterminated literal"},
      {"root ::= [abc", "unterminated character class"},
      {"root ::= []", "an empty character class matches nothing"},
      {"root ::= [z-a]", "the range's end comes before its start"},
      {"root ::= \"\\q\"", "unknown escape '\\q'"},
      {"root ::= \"\\x4\"", "the escape needs 2 hexadecimal digits"},
      {"root ::= \"\\uD800\"", "U+D800 is not a Unicode scalar value"},
      {"root ::= \"a\"{3,2}", "the repetition's maximum is below its minimum"},
      {"root ::= \"a\"{20000}", "a repetition count above 10000"},
      {"root ::= \"a\"{,}", "'{,}' gives no count"},
      {"root ::= <think>", "token references (<...>) are not supported"},
      {"root \"a\"", "expected '::=' after the rule name 'root'"},
      {"root ::= (\"a\" | \"b\"", "expected ')' to close the group"},
      {"root ::= \"a\" )", "line 1, column 14: unexpected ')'"},
      {"root ::= \"a\"\n  \"b\"", "line 2, column 3: expected a rule name"},
      {"root ::= root \"a\" | \"b\"", "rule 'root' is left-recursive"},
      {"root ::= x\nx ::= y \"a\"\ny ::= \"\" | x", "is left-recursive"},
      {"root ::= \"\xff\"", "invalid UTF-8"},
      {"root ::= \"\xf8\x80\x80\"", "invalid UTF-8"},  // no 5-byte forms
      {"root ::= " + std::string(300, '(') + "\"a\"" + std::string(300, ')'),
       "groups nested deeper than 256"},
  };
  for (const auto& [gbnf, want] : cases) {
    EXPECT_NE(parse_error(gbnf).find(want), std::string::npos)
        << gbnf << "\n  gave: " << parse_error(gbnf) << "\n  want: " << want;
  }
  // Right recursion is fine: the matcher opens a rule only after a character.
  EXPECT_TRUE(matches(compile("root ::= \"a\" root | \"b\""), "aaab"));
  // A newline inside a literal is part of it, as in llama.cpp.
  EXPECT_TRUE(matches(compile("root ::= \"a\nb\""), "a\nb"));
  // Too many readings at once is refused when it happens, not followed.
  EXPECT_THROW(matches(compile(R"(root ::= ("a"?){0,5000} "b")"), "aab"), Error);
  // A grammar built by hand gets the parser's checks.
  Grammar by_hand;
  by_hand.char_sets.push_back({{{'b', 'b'}, {'a', 'a'}}, false});  // unsorted
  by_hand.rules.push_back({"root", {{{Symbol::Kind::chars, 0}}}});
  EXPECT_TRUE(matches(std::make_shared<const CompiledGrammar>(by_hand), "a"));
  by_hand.rules[0].alternatives.push_back({{Symbol::Kind::rule, 0}});
  EXPECT_THROW(CompiledGrammar{by_hand}, Error);  // root ::= [ab] | root
}

// Grammars that a regular expression writes too: the matcher must agree
// with std::regex on every string of a small alphabet up to a length, and
// on random longer ones.
TEST(GrammarMatcher, AgreesWithRegexOnEveryShortString) {
  struct Case {
    const char* gbnf;
    const char* regex;
  };
  const Case cases[] = {
      {R"(root ::= ("ab" | [c-e]+ "x"?)* "!")", "(ab|[c-e]+x?)*!"},
      {R"(root ::= "a"{1,3} ("b" | "c" "d"{2})? [^a-c]*)", "a{1,3}(b|cd{2})?[^a-c]*"},
      {R"g(root ::= x ("," x)*
x ::= [0-9]+ | "(" [a-e]* ")")g",
       "([0-9]+|\\([a-e]*\\))(,([0-9]+|\\([a-e]*\\)))*"},
      {R"(root ::= ("a" | "ab") ("c" | "bc") | "" | "d"+ "e"{2,})", "(a|ab)(c|bc)||d+e{2,}"},
  };
  const std::string alphabet = "abcde!x,0()";
  std::mt19937 rng(7);
  for (const Case& c : cases) {
    const auto grammar = compile(c.gbnf);
    const std::regex regex(c.regex);
    int accepted = 0;
    // Every string up to length 4, then random ones up to length 12.
    std::vector<std::string> texts = {""};
    for (size_t i = 0; i < texts.size() && texts[i].size() < 4; ++i) {
      for (const char ch : alphabet) texts.push_back(texts[i] + ch);
    }
    for (int i = 0; i < 3000; ++i) {
      std::string text(rng() % 13, ' ');
      for (char& ch : text) ch = alphabet[rng() % alphabet.size()];
      texts.push_back(text);
    }
    for (const std::string& text : texts) {
      const bool want = std::regex_match(text, regex);
      ASSERT_EQ(matches(grammar, text), want) << c.gbnf << " on \"" << text << "\"";
      accepted += want;
    }
    EXPECT_GT(accepted, 5) << c.gbnf;  // the comparison saw both answers
  }
}

TEST(GrammarMatcher, FollowsACharacterSplitAcrossBytes) {
  const auto g = compile(R"(root ::= "é" [α-γ] | "a")");
  GrammarMatcher m(g);
  EXPECT_TRUE(m.accept("\xc3"));  // é's first byte
  EXPECT_FALSE(m.can_end());
  EXPECT_FALSE(m.accept("\xc3"));  // not a continuation byte
  EXPECT_TRUE(m.accept("\xa9"));   // é
  EXPECT_TRUE(m.accept("\xce"));   // α, β, γ and ζ begin so
  EXPECT_FALSE(m.accept("\xb6"));  // ζ (U+03B6) is outside [α-γ]
  EXPECT_TRUE(m.accept("\xb2"));   // β
  EXPECT_TRUE(m.can_end());
  // A lead byte no character of the grammar begins with is refused at once.
  GrammarMatcher other(g);
  EXPECT_FALSE(other.accept("\xe2"));
  EXPECT_FALSE(other.accept("\xc0"));  // never valid (overlong)
  const auto any = compile("root ::= .");
  EXPECT_FALSE(matches(any, "\xed\xa0\x80"));  // a surrogate
  EXPECT_FALSE(matches(any, "\xe0\x80\x80"));  // overlong
  EXPECT_TRUE(matches(any, "\xf4\x8f\xbf\xbf"));
  EXPECT_FALSE(is_prefix(any, "\xf4\x90"));  // above U+10FFFF
}

// The mask must be exactly "feed the token's bytes and see": random pieces
// (some ending inside a character), states along random accepted outputs.
TEST(TokenMask, IsWhatFeedingEachTokenGives) {
  const auto grammar = compile(kJson);
  std::mt19937 rng(11);
  const std::vector<std::string> atoms = {
      "{",   "}", "\"", ":", ",", " ",    "\n",   "[",  "]", "a",        "b",
      "1",   "0", "-",  ".", "e", "true", "null", "\\", "u", "\xc3\xa9", "\xf0\x9f\x98\x80",
      "\x01"};
  std::vector<std::string> pieces = {"", ""};  // 0: an end token, 1: a control token
  for (int i = 0; i < 1000; ++i) {
    std::string piece;
    const int n = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < n; ++k) piece += atoms[rng() % atoms.size()];
    // Now and then cut inside a multi-byte character.
    if (rng() % 8 == 0 && piece.size() > 1) piece.resize(piece.size() - 1);
    pieces.push_back(piece);
  }
  const TokenMask mask(pieces, {0});
  std::vector<uint8_t> allowed;
  int checked = 0, ends = 0;
  for (int walk = 0; walk < 10; ++walk) {
    GrammarMatcher matcher(grammar);
    for (int step = 0; step < 30; ++step) {
      mask.compute(matcher.grammar(), matcher.state(), allowed);
      std::vector<size_t> ok;
      for (size_t id = 0; id < pieces.size(); ++id) {
        MatchState state = matcher.state();
        bool alive = !pieces[id].empty();
        for (const char c : pieces[id]) {
          if (alive) alive = matcher.grammar().advance(state, static_cast<uint8_t>(c));
        }
        if (id == 0) alive = matcher.can_end();
        ASSERT_EQ(allowed[id] != 0, alive) << "token " << id << " \"" << pieces[id] << "\"";
        if (alive && id != 0) ok.push_back(id);
        ++checked;
      }
      ends += allowed[0];
      if (ok.empty()) break;
      ASSERT_TRUE(matcher.accept(pieces[ok[rng() % ok.size()]]));
    }
  }
  EXPECT_GT(checked, 50000);
  EXPECT_GT(ends, 0);  // some walks reached a point where the grammar may end
}

}  // namespace
}  // namespace cortiq::grammar
