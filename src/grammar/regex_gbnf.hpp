// JSON Schema's "pattern" in a grammar: a GBNF expression for the text
// between the quotes of a JSON string whose value the regular expression
// matches (ECMAScript syntax, as JSON Schema specifies it, with the "u"
// flag validators use).
//
//   json_string_pattern_gbnf("^[a-z]+@[a-z]+\\.com$", "char")
//
// Characters JSON must escape (", \, control characters) are written
// escaped. Supported: literals and escapes (\d \w \s and their negations,
// \n \t \xHH \uHHHH \u{H...}), classes with ranges and negation, ".",
// groups ((...), (?:...), (?<name>...)), alternation, the quantifiers
// * + ? {n} {n,} {n,m} (lazy ones too: the same strings), and ^ / $ at the
// ends of the pattern or of its top-level alternatives. A pattern not
// anchored at an end may have any text there, as in a validator.
#pragma once

#include <string>
#include <string_view>

namespace cortiq::grammar {

// any_char_rule: the name of a rule matching one character of a JSON
// string, escapes included (what an unanchored end may repeat). Throws
// cortiq::Error naming what a grammar cannot express (lookaround,
// backreferences, word boundaries, Unicode property escapes) or the
// syntax error and its offset.
std::string json_string_pattern_gbnf(std::string_view pattern, std::string_view any_char_rule);

}  // namespace cortiq::grammar
