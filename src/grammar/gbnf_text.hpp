// Pieces of GBNF text for the code that writes grammars (json_schema,
// regex_gbnf, integer_range, chat/tool_calls): literals, characters of a
// class, alternatives.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace cortiq::grammar {

// "text" with the quote, backslash and control characters escaped; UTF-8
// passes through.
std::string gbnf_literal(std::string_view text);
// A code point as a class or literal writes it: letters and digits as
// themselves, anything else as \xHH, \uHHHH or \UHHHHHHHH.
std::string gbnf_char(uint32_t cp);
// The non-empty parts with `separator` between them.
std::string join_nonempty(const std::vector<std::string>& parts, std::string_view separator);

}  // namespace cortiq::grammar
