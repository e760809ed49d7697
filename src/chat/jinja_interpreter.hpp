// Renders a parsed template. A Template is parsed once and can be rendered
// many times, from any number of threads (rendering keeps its own state).
//
//   jinja::Template t("Hello {{ name | upper }}!");
//   jinja::Dict vars;
//   vars.set("name", "world");
//   t.render(vars);  // "Hello WORLD!"
//
// Errors (syntax, unknown filters, raise_exception) throw cortiq::Error
// whose message names the template line.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "chat/jinja_ast.hpp"
#include "chat/jinja_lexer.hpp"
#include "chat/jinja_value.hpp"

namespace cortiq::jinja {

class Template {
 public:
  explicit Template(std::string_view source, const LexOptions& options = {});

  // `variables` are the template's globals; they shadow the builtins
  // (range, dict, namespace, raise_exception, strftime_now).
  std::string render(const Dict& variables) const;

 private:
  std::shared_ptr<const Body> body_;
};

}  // namespace cortiq::jinja
