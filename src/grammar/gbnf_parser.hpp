// GBNF, the grammar notation of llama.cpp (grammars/README.md there), read
// into a Grammar:
//
//   root   ::= object
//   object ::= "{" ws ( pair ( "," ws pair )* )? "}"
//   pair   ::= string ":" ws value       # comments run to the end of the line
//   digit  ::= [0-9]  hex ::= [^g-zG-Z]  any ::= .
//   list   ::= item{1,3} | item* | item+ | item?
//
// Literals and character classes take the escapes \n \r \t \\ \" \[ \]
// \- \/ \xHH \uHHHH \UHHHHHHHH; text is UTF-8. A rule ends at the end of
// its line, except inside parentheses and after "|" or "::=". Repetitions
// and groups become rules of their own ("<rule>_<n>").
#pragma once

#include <string_view>

#include "grammar/grammar.hpp"

namespace cortiq::grammar {

// Throws cortiq::Error naming the line and column of the first problem
// ("grammar line 3, column 12: unterminated literal"), a rule used but
// never defined, one defined twice, a missing root rule or left recursion.
Grammar parse_gbnf(std::string_view text, std::string_view root = "root");

}  // namespace cortiq::grammar
