// Turns the token stream of a template into statements (jinja_ast.hpp),
// following Jinja2's grammar and operator precedence.
#pragma once

#include <string_view>

#include "chat/jinja_ast.hpp"
#include "chat/jinja_lexer.hpp"

namespace cortiq::jinja {

// Throws cortiq::Error("template line N: ...") on a syntax error.
Body parse_template(std::string_view source, const LexOptions& options = {});

}  // namespace cortiq::jinja
