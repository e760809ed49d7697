// Splits a Jinja template into tokens: literal text, the delimiters of
// {{ }} and {% %}, and the names, literals and operators inside them.
// Comments vanish here. Whitespace control is applied while lexing, the
// way Hugging Face configures Jinja2 (trim_blocks and lstrip_blocks on):
// `{%-`/`-%}` strip all whitespace on that side, `{%+`/`+%}` keep it.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace cortiq::jinja {

struct Token {
  enum class Kind {
    text,
    var_begin,
    var_end,
    block_begin,
    block_end,
    name,
    string,
    integer,
    floating,
    op,
    eof
  };
  Kind kind;
  std::string text;  // text, name, operator, or the decoded string literal
  int line = 1;      // 1-based line of the template where the token starts
};

struct LexOptions {
  bool trim_blocks = true;
  bool lstrip_blocks = true;
};

// Throws cortiq::Error("template line N: ...") on unterminated tags or strings.
std::vector<Token> lex_template(std::string_view source, const LexOptions& options = {});

}  // namespace cortiq::jinja
