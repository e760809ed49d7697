#include "chat/jinja_parser.hpp"

#include <algorithm>
#include <initializer_list>

#include "base/error.hpp"

namespace cortiq::jinja {
namespace {

using TK = Token::Kind;

// Nesting deeper than this is refused rather than risking the C++ stack
// (real templates nest a few dozen levels at most).
constexpr int kMaxNesting = 400;

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : toks_(std::move(tokens)) {}

  Body parse_all() {
    std::string end;
    Body body = parse_body({}, end);
    return body;
  }

 private:
  // ---- token helpers ----
  const Token& cur() const { return toks_[pos_]; }
  const Token& peek(size_t k = 1) const { return toks_[std::min(pos_ + k, toks_.size() - 1)]; }
  bool at_op(std::string_view op) const { return cur().kind == TK::op && cur().text == op; }
  bool at_name(std::string_view n) const { return cur().kind == TK::name && cur().text == n; }
  bool accept_op(std::string_view op) {
    if (!at_op(op)) return false;
    ++pos_;
    return true;
  }
  bool accept_name(std::string_view n) {
    if (!at_name(n)) return false;
    ++pos_;
    return true;
  }
  [[noreturn]] void fail(const std::string& what) const {
    throw Error("template line " + std::to_string(cur().line) + ": " + what);
  }
  std::string describe(const Token& t) const {
    switch (t.kind) {
      case TK::eof:
        return "end of template";
      case TK::block_end:
        return "'%}'";
      case TK::var_end:
        return "'}}'";
      case TK::text:
        return "text";
      default:
        return "'" + t.text + "'";
    }
  }
  void expect_op(std::string_view op) {
    if (!accept_op(op)) fail("expected '" + std::string(op) + "', got " + describe(cur()));
  }
  std::string expect_name() {
    if (cur().kind != TK::name) fail("expected a name, got " + describe(cur()));
    return toks_[pos_++].text;
  }
  void expect(TK kind, const char* what) {
    if (cur().kind != kind) fail(std::string("expected ") + what + ", got " + describe(cur()));
    ++pos_;
  }

  ExprPtr make(Expr::Kind kind, int line) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = line;
    return e;
  }

  // ---- statements ----
  // Parses until a block whose keyword is in `ends`; leaves `end` set to
  // that keyword and the position just after it.
  Body parse_body(std::initializer_list<std::string_view> ends, std::string& end) {
    Body body;
    for (;;) {
      const Token& t = cur();
      if (t.kind == TK::eof) {
        if (ends.size() == 0) return body;
        fail("unexpected end of template, expected '" + std::string(*ends.begin()) + "'");
      }
      if (t.kind == TK::text) {
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::text;
        s->line = t.line;
        s->text = t.text;
        body.push_back(std::move(s));
        ++pos_;
      } else if (t.kind == TK::var_begin) {
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::output;
        s->line = t.line;
        ++pos_;
        s->expr = parse_tuple(true);
        expect(TK::var_end, "'}}'");
        body.push_back(std::move(s));
      } else if (t.kind == TK::block_begin) {
        const Token& kw = peek();
        if (kw.kind == TK::name &&
            std::find(ends.begin(), ends.end(), std::string_view(kw.text)) != ends.end()) {
          end = kw.text;
          pos_ += 2;
          return body;
        }
        ++pos_;
        body.push_back(parse_statement());
      } else {
        fail("unexpected " + describe(t));
      }
    }
  }

  StmtPtr parse_statement() {
    NestingGuard guard(*this);
    int line = cur().line;
    std::string kw = expect_name();
    auto s = std::make_unique<Stmt>();
    s->line = line;
    if (kw == "if")
      parse_if(*s);
    else if (kw == "for")
      parse_for(*s);
    else if (kw == "set")
      parse_set(*s);
    else if (kw == "macro")
      parse_macro(*s);
    else if (kw == "call")
      parse_call_block(*s);
    else if (kw == "filter")
      parse_filter_block(*s);
    else if (kw == "generation")
      parse_scope(*s, "endgeneration");
    else if (kw == "do") {
      s->kind = Stmt::Kind::do_;
      s->expr = parse_tuple(true);
      end_block();
    } else if (kw == "break" || kw == "continue") {
      s->kind = kw == "break" ? Stmt::Kind::break_ : Stmt::Kind::continue_;
      end_block();
    } else {
      pos_ -= 1;
      fail("unknown statement '" + kw + "'");
    }
    return s;
  }

  void end_block() { expect(TK::block_end, "'%}'"); }

  void parse_if(Stmt& s) {
    s.kind = Stmt::Kind::if_;
    ExprPtr cond = parse_tuple(true);
    for (;;) {
      end_block();
      std::string end;
      Body body = parse_body({"elif", "else", "endif"}, end);
      s.branches.emplace_back(std::move(cond), std::move(body));
      if (end == "endif") break;
      if (end == "else") {
        end_block();
        Body else_body = parse_body({"endif"}, end);
        s.branches.emplace_back(nullptr, std::move(else_body));
        break;
      }
      cond = parse_tuple(true);
    }
    end_block();
  }

  void parse_for(Stmt& s) {
    s.kind = Stmt::Kind::for_;
    do {
      s.targets.push_back(expect_name());
    } while (accept_op(","));
    if (!accept_name("in")) fail("expected 'in' in for loop");
    // No ternary here: a trailing `if` filters the loop.
    s.expr = parse_tuple(false);
    if (accept_name("if")) s.cond = parse_expression(true);
    accept_name("recursive");
    end_block();
    std::string end;
    s.body = parse_body({"else", "endfor"}, end);
    if (end == "else") {
      end_block();
      s.else_body = parse_body({"endfor"}, end);
    }
    end_block();
  }

  void parse_set(Stmt& s) {
    s.targets.push_back(expect_name());
    if (accept_op(".")) s.attr = expect_name();
    while (accept_op(",")) s.targets.push_back(expect_name());
    if (accept_op("=")) {
      s.kind = Stmt::Kind::set;
      s.expr = parse_tuple(true);
      end_block();
      return;
    }
    s.kind = Stmt::Kind::set_block;
    if (at_op("|")) s.expr = parse_filter_chain(nullptr);
    end_block();
    std::string end;
    s.body = parse_body({"endset"}, end);
    end_block();
  }

  void parse_macro(Stmt& s) {
    s.kind = Stmt::Kind::macro;
    s.text = expect_name();
    expect_op("(");
    while (!accept_op(")")) {
      std::string name = expect_name();
      ExprPtr def;
      if (accept_op("=")) def = parse_expression(true);
      s.params.emplace_back(std::move(name), std::move(def));
      if (!at_op(")")) expect_op(",");
    }
    end_block();
    std::string end;
    s.body = parse_body({"endmacro"}, end);
    if (cur().kind == TK::name) ++pos_;  // {% endmacro name %}
    end_block();
  }

  void parse_call_block(Stmt& s) {
    s.kind = Stmt::Kind::call_block;
    if (at_op("(")) {  // caller parameters: {% call(x) m() %}
      while (!accept_op(")")) ++pos_;
    }
    s.expr = parse_expression(true);
    end_block();
    std::string end;
    s.body = parse_body({"endcall"}, end);
    end_block();
  }

  void parse_filter_block(Stmt& s) {
    s.kind = Stmt::Kind::filter_block;
    s.expr = parse_filter_chain(nullptr, /*leading_pipe=*/false);
    end_block();
    std::string end;
    s.body = parse_body({"endfilter"}, end);
    end_block();
  }

  void parse_scope(Stmt& s, std::string_view end_name) {
    s.kind = Stmt::Kind::scope;
    end_block();
    std::string end;
    s.body = parse_body({end_name}, end);
    end_block();
  }

  // ---- expressions, lowest precedence first ----
  // A bare comma list (`a, b`) is a tuple.
  ExprPtr parse_tuple(bool with_cond) {
    int line = cur().line;
    ExprPtr first = parse_expression(with_cond);
    if (!at_op(",")) return first;
    auto t = make(Expr::Kind::tuple, line);
    t->args.push_back(std::move(first));
    while (accept_op(",")) {
      if (cur().kind == TK::var_end || cur().kind == TK::block_end) break;
      t->args.push_back(parse_expression(with_cond));
    }
    return t;
  }

  ExprPtr parse_expression(bool with_cond) { return with_cond ? parse_cond() : parse_or(); }

  ExprPtr parse_cond() {
    ExprPtr expr = parse_or();
    while (at_name("if")) {
      int line = cur().line;
      ++pos_;
      auto c = make(Expr::Kind::cond, line);
      c->args.push_back(std::move(expr));
      c->args.push_back(parse_or());
      c->args.push_back(accept_name("else") ? parse_cond() : nullptr);
      expr = std::move(c);
    }
    return expr;
  }

  ExprPtr binary(std::string op, ExprPtr l, ExprPtr r, int line) {
    auto b = make(Expr::Kind::binary, line);
    b->name = std::move(op);
    b->args.push_back(std::move(l));
    b->args.push_back(std::move(r));
    return b;
  }

  ExprPtr parse_or() {
    ExprPtr l = parse_and();
    while (at_name("or")) {
      int line = cur().line;
      ++pos_;
      l = binary("or", std::move(l), parse_and(), line);
    }
    return l;
  }

  ExprPtr parse_and() {
    ExprPtr l = parse_not();
    while (at_name("and")) {
      int line = cur().line;
      ++pos_;
      l = binary("and", std::move(l), parse_not(), line);
    }
    return l;
  }

  ExprPtr parse_not() {
    NestingGuard guard(*this);
    if (at_name("not")) {
      auto u = make(Expr::Kind::unary, cur().line);
      ++pos_;
      u->name = "not";
      u->args.push_back(parse_not());
      return u;
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    ExprPtr l = parse_math1();
    for (;;) {
      int line = cur().line;
      std::string op;
      if (cur().kind == TK::op && (cur().text == "==" || cur().text == "!=" || cur().text == "<" ||
                                   cur().text == ">" || cur().text == "<=" || cur().text == ">=")) {
        op = cur().text;
        ++pos_;
      } else if (at_name("in")) {
        op = "in";
        ++pos_;
      } else if (at_name("not") && peek().kind == TK::name && peek().text == "in") {
        op = "not in";
        pos_ += 2;
      } else {
        return l;
      }
      l = binary(op, std::move(l), parse_math1(), line);
    }
  }

  ExprPtr parse_math1() {
    ExprPtr l = parse_concat();
    while (at_op("+") || at_op("-")) {
      int line = cur().line;
      std::string op = toks_[pos_++].text;
      l = binary(op, std::move(l), parse_concat(), line);
    }
    return l;
  }

  ExprPtr parse_concat() {
    ExprPtr l = parse_math2();
    while (at_op("~")) {
      int line = cur().line;
      ++pos_;
      l = binary("~", std::move(l), parse_math2(), line);
    }
    return l;
  }

  ExprPtr parse_math2() {
    ExprPtr l = parse_pow();
    while (at_op("*") || at_op("/") || at_op("//") || at_op("%")) {
      int line = cur().line;
      std::string op = toks_[pos_++].text;
      l = binary(op, std::move(l), parse_pow(), line);
    }
    return l;
  }

  ExprPtr parse_pow() {
    ExprPtr l = parse_unary(true);
    while (at_op("**")) {
      int line = cur().line;
      ++pos_;
      l = binary("**", std::move(l), parse_unary(true), line);
    }
    return l;
  }

  ExprPtr parse_unary(bool with_filter) {
    NestingGuard guard(*this);
    ExprPtr node;
    if (at_op("-") || at_op("+")) {
      auto u = make(Expr::Kind::unary, cur().line);
      u->name = toks_[pos_++].text;
      u->args.push_back(parse_unary(false));
      node = std::move(u);
    } else {
      node = parse_primary();
    }
    node = parse_postfix(std::move(node));
    if (with_filter) node = parse_filter_expr(std::move(node));
    return node;
  }

  ExprPtr parse_primary() {
    const Token& t = cur();
    int line = t.line;
    switch (t.kind) {
      case TK::name: {
        ++pos_;
        if (t.text == "true" || t.text == "True") return literal(Value(true), line);
        if (t.text == "false" || t.text == "False") return literal(Value(false), line);
        if (t.text == "none" || t.text == "None") return literal(Value::none(), line);
        auto n = make(Expr::Kind::name, line);
        n->name = t.text;
        return n;
      }
      case TK::string: {
        std::string s;
        while (cur().kind == TK::string) s += toks_[pos_++].text;  // adjacent literals join
        return literal(Value(std::move(s)), line);
      }
      case TK::integer: {
        ++pos_;
        return literal(Value(static_cast<int64_t>(std::stoll(t.text))), line);
      }
      case TK::floating: {
        ++pos_;
        return literal(Value(std::stod(t.text)), line);
      }
      case TK::op:
        if (t.text == "(") return parse_paren();
        if (t.text == "[") return parse_list();
        if (t.text == "{") return parse_dict();
        [[fallthrough]];
      default:
        fail("unexpected " + describe(t));
    }
  }

  ExprPtr literal(Value v, int line) {
    auto e = make(Expr::Kind::literal, line);
    e->value = std::move(v);
    return e;
  }

  ExprPtr parse_paren() {
    int line = cur().line;
    ++pos_;
    if (accept_op(")")) return make(Expr::Kind::tuple, line);
    ExprPtr first = parse_expression(true);
    if (accept_op(")")) return first;
    auto t = make(Expr::Kind::tuple, line);
    t->args.push_back(std::move(first));
    while (accept_op(",")) {
      if (at_op(")")) break;
      t->args.push_back(parse_expression(true));
    }
    expect_op(")");
    return t;
  }

  ExprPtr parse_list() {
    auto l = make(Expr::Kind::list, cur().line);
    ++pos_;
    while (!accept_op("]")) {
      l->args.push_back(parse_expression(true));
      if (!at_op("]")) expect_op(",");
    }
    return l;
  }

  ExprPtr parse_dict() {
    auto d = make(Expr::Kind::dict, cur().line);
    ++pos_;
    while (!accept_op("}")) {
      d->args.push_back(parse_expression(true));
      expect_op(":");
      d->args.push_back(parse_expression(true));
      if (!at_op("}")) expect_op(",");
    }
    return d;
  }

  ExprPtr parse_postfix(ExprPtr node) {
    for (;;) {
      int line = cur().line;
      if (accept_op(".")) {
        auto a = make(Expr::Kind::attr, line);
        if (cur().kind == TK::integer) {  // x.0 means x[0]
          a->kind = Expr::Kind::item;
          a->args.push_back(std::move(node));
          a->args.push_back(literal(Value(static_cast<int64_t>(std::stoll(cur().text))), line));
          ++pos_;
        } else {
          a->name = expect_name();
          a->args.push_back(std::move(node));
        }
        node = std::move(a);
      } else if (at_op("[")) {
        node = parse_subscript(std::move(node));
      } else if (at_op("(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr node) {
    int line = cur().line;
    ++pos_;
    ExprPtr parts[3];
    int colons = 0;
    for (;;) {
      if (at_op(":")) {
        ++pos_;
        if (++colons > 2) fail("too many ':' in slice");
        continue;
      }
      if (at_op("]")) break;
      if (parts[colons]) fail("expected ']' or ':'");
      parts[colons] = parse_expression(true);
    }
    ++pos_;
    if (colons == 0) {
      if (!parts[0]) fail("empty subscript");
      auto i = make(Expr::Kind::item, line);
      i->args.push_back(std::move(node));
      i->args.push_back(std::move(parts[0]));
      return i;
    }
    auto s = make(Expr::Kind::slice, line);
    s->args.push_back(std::move(node));
    for (auto& p : parts) s->args.push_back(std::move(p));
    return s;
  }

  void parse_call_args(Expr& e) {
    expect_op("(");
    while (!accept_op(")")) {
      if (cur().kind == TK::name && peek().kind == TK::op && peek().text == "=") {
        std::string key = toks_[pos_].text;
        pos_ += 2;
        e.kwargs.emplace_back(std::move(key), parse_expression(true));
      } else {
        e.args.push_back(parse_expression(true));
      }
      if (!at_op(")")) expect_op(",");
    }
  }

  ExprPtr parse_call(ExprPtr callee) {
    auto c = make(Expr::Kind::call, cur().line);
    c->args.push_back(std::move(callee));
    parse_call_args(*c);
    return c;
  }

  ExprPtr parse_filter_expr(ExprPtr node) {
    for (;;) {
      if (at_op("|"))
        node = parse_filter_chain(std::move(node), true, /*single=*/true);
      else if (at_name("is"))
        node = parse_test(std::move(node));
      else if (at_op("("))
        node = parse_call(std::move(node));
      else
        return node;
    }
  }

  // `| f(args) | g ...`; with `single` only one filter is consumed.
  ExprPtr parse_filter_chain(ExprPtr node, bool leading_pipe = true, bool single = false) {
    bool first = true;
    while ((first && !leading_pipe) || at_op("|")) {
      if (!(first && !leading_pipe)) ++pos_;
      first = false;
      auto f = make(Expr::Kind::filter, cur().line);
      f->name = expect_name();
      while (accept_op(".")) f->name += "." + expect_name();
      f->args.push_back(std::move(node));
      if (at_op("(")) parse_call_args(*f);
      node = std::move(f);
      if (single) break;
    }
    return node;
  }

  ExprPtr parse_test(ExprPtr node) {
    auto t = make(Expr::Kind::test, cur().line);
    ++pos_;  // is
    t->negated = accept_name("not");
    t->name = expect_name();
    t->args.push_back(std::move(node));
    if (at_op("(")) {
      parse_call_args(*t);
    } else if ((cur().kind == TK::name || cur().kind == TK::string || cur().kind == TK::integer ||
                cur().kind == TK::floating || at_op("[") || at_op("{")) &&
               !at_name("else") && !at_name("or") && !at_name("and") && !at_name("is") &&
               !at_name("in") && !at_name("not") && !at_name("if")) {
      t->args.push_back(parse_postfix(parse_primary()));
    }
    return t;
  }

  // Counts recursion through the parser; throws past kMaxNesting.
  class NestingGuard {
   public:
    explicit NestingGuard(Parser& p) : p_(p) {
      if (++p_.nesting_ > kMaxNesting) p_.fail("template nested too deeply");
    }
    ~NestingGuard() { --p_.nesting_; }
    NestingGuard(const NestingGuard&) = delete;
    NestingGuard& operator=(const NestingGuard&) = delete;

   private:
    Parser& p_;
  };

  std::vector<Token> toks_;
  size_t pos_ = 0;
  int nesting_ = 0;
};

}  // namespace

Body parse_template(std::string_view source, const LexOptions& options) {
  return Parser(lex_template(source, options)).parse_all();
}

}  // namespace cortiq::jinja
