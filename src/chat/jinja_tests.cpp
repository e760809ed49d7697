// Jinja2's builtin tests: `x is defined`, `x is string`, `n is divisibleby 3`...
#include <string>

#include "base/error.hpp"
#include "chat/jinja_builtins.hpp"
#include "chat/jinja_ops.hpp"

namespace cortiq::jinja {

namespace {

const Value& test_arg(CallArgs& a, std::string_view test) {
  if (a.positional.empty()) throw Error("test '" + std::string(test) + "' needs an argument");
  return a.positional[0];
}

bool is_lower_text(const std::string& s) {
  return py_lower(s) == s;
}
bool is_upper_text(const std::string& s) {
  return py_upper(s) == s;
}

}  // namespace

bool apply_test(std::string_view name, const Value& v, CallArgs& a) {
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "boolean") return v.is_bool();
  if (name == "true") return v.is_bool() && v.as_bool();
  if (name == "false") return v.is_bool() && !v.as_bool();
  if (name == "integer") return v.is_int();
  if (name == "float") return v.is_float();
  // Python's bool is a Number, so `true is number` holds in Jinja too.
  if (name == "number") return v.is_number() || v.is_bool();
  if (name == "string") return v.is_string();
  if (name == "mapping") return v.is_dict();
  if (name == "iterable") return v.is_list() || v.is_dict() || v.is_string() || v.is_undefined();
  if (name == "sequence") return v.is_list() || v.is_dict() || v.is_string();
  if (name == "callable") return v.is_function();
  if (name == "odd") return v.as_int() % 2 != 0;
  if (name == "even") return v.as_int() % 2 == 0;
  if (name == "divisibleby") {
    int64_t d = test_arg(a, name).as_int();
    if (d == 0) throw Error("integer division or modulo by zero");
    return v.as_int() % d == 0;
  }
  if (name == "lower") return v.is_string() && is_lower_text(v.as_string());
  if (name == "upper") return v.is_string() && is_upper_text(v.as_string());
  if (name == "sameas") return v.same_object(test_arg(a, name));
  if (name == "eq" || name == "equalto" || name == "==") return v == test_arg(a, name);
  if (name == "ne" || name == "!=") return !(v == test_arg(a, name));
  if (name == "lt" || name == "lessthan" || name == "<") return compare(v, test_arg(a, name)) < 0;
  if (name == "le" || name == "<=") return compare(v, test_arg(a, name)) <= 0;
  if (name == "gt" || name == "greaterthan" || name == ">")
    return compare(v, test_arg(a, name)) > 0;
  if (name == "ge" || name == ">=") return compare(v, test_arg(a, name)) >= 0;
  if (name == "in") return contains(test_arg(a, name), v);
  if (name == "escaped") return false;
  throw Error("unknown test '" + std::string(name) + "'");
}

}  // namespace cortiq::jinja
