// The syntax tree of a parsed template: expressions and statements. Plain
// structs with a kind tag; the interpreter walks them directly.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "chat/jinja_value.hpp"

namespace cortiq::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    literal,  // value
    name,     // name
    list,     // args
    tuple,    // args
    dict,     // args: key, value, key, value...
    attr,     // args[0].name
    item,     // args[0][args[1]]
    slice,    // args[0][args[1]:args[2]:args[3]], each bound may be null
    call,     // args[0](args[1..], kwargs)
    filter,   // args[0] | name(args[1..], kwargs); args[0] null in filter blocks
    test,     // args[0] is [not] name(args[1..])
    unary,    // name is "not", "-" or "+"
    binary,   // args[0] name args[1]
    cond,     // args[0] if args[1] else args[2] (may be null)
  };
  Kind kind;
  int line = 0;
  Value value;
  std::string name;
  bool negated = false;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct Stmt {
  enum class Kind {
    text,          // text
    output,        // {{ expr }}
    if_,           // branches
    for_,          // for targets in expr [if cond]: body else else_body
    set,           // set targets = expr; or set targets[0].attr = expr
    set_block,     // set targets[0] %}body{% endset
    macro,         // macro name(params) body
    call_block,    // call expr (a macro call) with `caller` = body
    filter_block,  // filter expr (filter chain with null subject) body
    do_,           // do expr
    break_,
    continue_,
    scope,  // body rendered in place (generation blocks)
  };
  Kind kind;
  int line = 0;
  std::string text;
  std::string attr;  // set ns.attr = ...
  ExprPtr expr;
  ExprPtr cond;  // for ... if cond
  std::vector<std::string> targets;
  std::vector<std::pair<ExprPtr, Body>> branches;  // if/elif/else (else: null cond)
  Body body;
  Body else_body;
  std::vector<std::pair<std::string, ExprPtr>> params;  // macro parameters and defaults
};

}  // namespace cortiq::jinja
