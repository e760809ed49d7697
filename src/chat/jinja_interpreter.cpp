#include "chat/jinja_interpreter.hpp"

#include <cmath>
#include <ctime>
#include <unordered_map>

#include "base/error.hpp"
#include "chat/jinja_builtins.hpp"
#include "chat/jinja_ops.hpp"
#include "chat/jinja_parser.hpp"

namespace cortiq::jinja {
namespace {

using Frame = std::unordered_map<std::string, Value>;
using Scopes = std::vector<std::shared_ptr<Frame>>;
// Closures (macros, call-block callers) see their defining scopes weakly: a
// macro is stored in one of those frames, so a strong capture would be a
// reference cycle that leaks the frames and the template's syntax tree.
using WeakScopes = std::vector<std::weak_ptr<Frame>>;

Scopes lock_scopes(const WeakScopes& weak) {
  Scopes scopes;
  scopes.reserve(weak.size());
  for (const std::weak_ptr<Frame>& frame : weak) {
    std::shared_ptr<Frame> alive = frame.lock();
    if (!alive) throw Error("macro called after the scope that defined it ended");
    scopes.push_back(std::move(alive));
  }
  return scopes;
}

// Deep macro recursion would overflow the C++ stack; Python stops near 1000.
// The count is per thread because macros are closures that outlive the
// interpreter which defined them.
constexpr int kMaxCallDepth = 200;
thread_local int t_call_depth = 0;

struct CallDepthGuard {
  CallDepthGuard() {
    if (++t_call_depth > kMaxCallDepth) {
      --t_call_depth;
      throw Error("macro recursion too deep");
    }
  }
  ~CallDepthGuard() { --t_call_depth; }
  CallDepthGuard(const CallDepthGuard&) = delete;
  CallDepthGuard& operator=(const CallDepthGuard&) = delete;
};

bool has_line_prefix(const std::string& msg) {
  return msg.rfind("template line ", 0) == 0;
}

[[noreturn]] void fail_at(int line, const std::string& what) {
  throw Error("template line " + std::to_string(line) + ": " + what);
}

// ---- builtin globals ----

Value builtin_range(CallArgs& a) {
  if (a.positional.empty() || a.positional.size() > 3)
    throw Error("range expected 1 to 3 arguments");
  int64_t start = 0, stop, step = 1;
  if (a.positional.size() == 1) {
    stop = a.positional[0].as_int();
  } else {
    start = a.positional[0].as_int();
    stop = a.positional[1].as_int();
    if (a.positional.size() == 3) step = a.positional[2].as_int();
  }
  if (step == 0) throw Error("range() arg 3 must not be zero");
  List out;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    if (out.size() > 1000000) throw Error("range too large");
    out.emplace_back(i);
  }
  return Value(std::move(out));
}

Value builtin_dict(CallArgs& a) {
  Dict d;
  if (!a.positional.empty() && a.positional[0].is_dict())
    d.items = a.positional[0].as_dict().items;
  else if (!a.positional.empty())
    for (const Value& pair : iterate(a.positional[0])) {
      if (!pair.is_list() || pair.as_list().size() != 2)
        throw Error("dict() needs key/value pairs");
      d.set(pair.as_list()[0], pair.as_list()[1]);
    }
  for (const auto& [k, v] : a.keywords) d.set(Value(k), v);
  return Value(std::move(d));
}

Value builtin_namespace(CallArgs& a) {
  Value v = builtin_dict(a);
  v.as_dict().is_namespace = true;
  return v;
}

Value builtin_raise(CallArgs& a) {
  throw Error(a.positional.empty() ? std::string("template raised an exception")
                                   : a.positional[0].str());
}

Value builtin_strftime_now(CallArgs& a) {
  if (a.positional.empty()) throw Error("strftime_now() needs a format");
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char buf[256];
  size_t n = std::strftime(buf, sizeof buf, a.positional[0].str().c_str(), &tm);
  return Value(std::string(buf, n));
}

const Frame& builtins() {
  static const Frame table = {
      {"range", Value(Function(builtin_range))},
      {"dict", Value(Function(builtin_dict))},
      {"namespace", Value(Function(builtin_namespace))},
      {"raise_exception", Value(Function(builtin_raise))},
      {"strftime_now", Value(Function(builtin_strftime_now))},
  };
  return table;
}

// ---- arithmetic ----

bool numeric(const Value& v) {
  return v.is_number() || v.is_bool();
}

Value arithmetic(const std::string& op, const Value& l, const Value& r) {
  if (op == "+") {
    // Markup + text escapes the text, as markupsafe does.
    if (l.is_markup() || r.is_markup()) {
      if (l.is_string() && r.is_string()) {
        auto safe = [](const Value& v) {
          return v.is_markup() ? v.as_string() : html_escape(v.as_string());
        };
        return Value::markup(safe(l) + safe(r));
      }
    }
    if (l.is_string() && r.is_string()) return Value(l.as_string() + r.as_string());
    if (l.is_list() && r.is_list()) {
      List out = l.as_list();
      out.insert(out.end(), r.as_list().begin(), r.as_list().end());
      return Value(std::move(out));
    }
  }
  if (op == "*" && (l.is_string() || l.is_list()) && (r.is_int() || r.is_bool()))
    return arithmetic(op, r, l);
  if (op == "*" && (l.is_int() || l.is_bool()) && (r.is_string() || r.is_list())) {
    int64_t n = l.as_int();
    if (r.is_string()) {
      std::string out;
      for (int64_t i = 0; i < n; ++i) out += r.as_string();
      return Value(out);
    }
    List out;
    for (int64_t i = 0; i < n; ++i) out.insert(out.end(), r.as_list().begin(), r.as_list().end());
    return Value(std::move(out));
  }
  if (!numeric(l) || !numeric(r))
    throw Error("unsupported operand type(s) for " + op + ": '" + std::string(l.type_name()) +
                "' and '" + std::string(r.type_name()) + "'");
  bool fl = l.is_float() || r.is_float();
  if (op == "/") {
    if (r.as_float() == 0) throw Error("division by zero");
    return Value(l.as_float() / r.as_float());
  }
  if (op == "**") {
    if (!fl && r.as_int() >= 0) {
      int64_t out = 1;
      for (int64_t i = 0; i < r.as_int(); ++i) out *= l.as_int();
      return Value(out);
    }
    return Value(std::pow(l.as_float(), r.as_float()));
  }
  if (fl) {
    double x = l.as_float(), y = r.as_float();
    if (op == "+") return Value(x + y);
    if (op == "-") return Value(x - y);
    if (op == "*") return Value(x * y);
    if (y == 0) throw Error("float division by zero");
    if (op == "//") return Value(std::floor(x / y));
    double m = std::fmod(x, y);
    if (m != 0 && ((m < 0) != (y < 0))) m += y;
    return Value(m);
  }
  int64_t x = l.as_int(), y = r.as_int();
  if (op == "+") return Value(x + y);
  if (op == "-") return Value(x - y);
  if (op == "*") return Value(x * y);
  if (y == 0) throw Error("integer division or modulo by zero");
  int64_t q = x / y, m = x % y;
  if (m != 0 && ((m < 0) != (y < 0))) {
    --q;
    m += y;
  }
  return Value(op == "//" ? q : m);
}

// ---- the interpreter ----

class Interpreter {
 public:
  enum class Flow { normal, break_, continue_ };

  Interpreter(Scopes scopes, std::string& out, std::shared_ptr<const Body> keep)
      : scopes_(std::move(scopes)), out_(out), keep_(std::move(keep)) {}

  Flow exec(const Body& body) {
    for (const StmtPtr& s : body) {
      Flow f = exec(*s);
      if (f != Flow::normal) return f;
    }
    return Flow::normal;
  }

 private:
  Flow exec(const Stmt& s) {
    try {
      return exec_unchecked(s);
    } catch (const Error& e) {
      if (has_line_prefix(e.what())) throw;
      fail_at(s.line, e.what());
    }
  }

  Flow exec_unchecked(const Stmt& s) {
    switch (s.kind) {
      case Stmt::Kind::text:
        out_ += s.text;
        return Flow::normal;
      case Stmt::Kind::output:
        out_ += eval(*s.expr).str();
        return Flow::normal;
      case Stmt::Kind::if_:
        for (const auto& [cond, body] : s.branches)
          if (!cond || eval(*cond).truthy()) return exec(body);
        return Flow::normal;
      case Stmt::Kind::for_:
        return exec_for(s);
      case Stmt::Kind::set:
        exec_set(s, eval(*s.expr));
        return Flow::normal;
      case Stmt::Kind::set_block: {
        Value text(render_body(s.body));
        if (s.expr) text = apply_filter_chain(*s.expr, text);
        exec_set(s, text);
        return Flow::normal;
      }
      case Stmt::Kind::macro:
        define_macro(s);
        return Flow::normal;
      case Stmt::Kind::call_block:
        out_ += call_with_caller(s).str();
        return Flow::normal;
      case Stmt::Kind::filter_block:
        out_ += apply_filter_chain(*s.expr, Value(render_body(s.body))).str();
        return Flow::normal;
      case Stmt::Kind::do_:
        eval(*s.expr);
        return Flow::normal;
      case Stmt::Kind::break_:
        return Flow::break_;
      case Stmt::Kind::continue_:
        return Flow::continue_;
      case Stmt::Kind::scope:
        return exec(s.body);
    }
    return Flow::normal;
  }

  std::string render_body(const Body& body) {
    std::string text;
    Interpreter sub(scopes_, text, keep_);
    sub.exec(body);
    return text;
  }

  void assign(const std::string& name, Value v) { (*scopes_.back())[name] = std::move(v); }

  void bind_targets(const std::vector<std::string>& targets, const Value& v) {
    if (targets.size() == 1) return assign(targets[0], v);
    auto items = iterate(v);
    if (items.size() != targets.size())
      throw Error("cannot unpack " + std::to_string(items.size()) + " values into " +
                  std::to_string(targets.size()) + " names");
    for (size_t i = 0; i < targets.size(); ++i) assign(targets[i], items[i]);
  }

  void exec_set(const Stmt& s, Value v) {
    if (s.attr.empty()) return bind_targets(s.targets, v);
    Value ns = lookup(s.targets[0]);
    if (!ns.is_dict() || !ns.as_dict().is_namespace)
      throw Error("cannot assign attribute '" + s.attr + "' on " + std::string(ns.type_name()) +
                  " (only namespace objects)");
    ns.as_dict().set(Value(s.attr), std::move(v));
  }

  Flow exec_for(const Stmt& s) {
    std::vector<Value> items = iterate(eval(*s.expr));
    scopes_.push_back(std::make_shared<Frame>());
    if (s.cond) {
      std::vector<Value> kept;
      for (const Value& item : items) {
        bind_targets(s.targets, item);
        if (eval(*s.cond).truthy()) kept.push_back(item);
      }
      items = std::move(kept);
    }
    for (size_t i = 0; i < items.size(); ++i) {
      scopes_.back() = std::make_shared<Frame>();
      bind_targets(s.targets, items[i]);
      assign("loop", loop_object(items, i));
      if (exec(s.body) == Flow::break_) break;
    }
    scopes_.pop_back();
    if (items.empty()) return exec(s.else_body);
    return Flow::normal;
  }

  static Value loop_object(const std::vector<Value>& items, size_t i) {
    auto n = static_cast<int64_t>(items.size());
    auto k = static_cast<int64_t>(i);
    Dict d;
    d.set("index", Value(k + 1));
    d.set("index0", Value(k));
    d.set("revindex", Value(n - k));
    d.set("revindex0", Value(n - k - 1));
    d.set("first", Value(i == 0));
    d.set("last", Value(k == n - 1));
    d.set("length", Value(n));
    d.set("depth", Value(int64_t{1}));
    d.set("depth0", Value(int64_t{0}));
    d.set("previtem", i > 0 ? items[i - 1] : Value());
    d.set("nextitem", k + 1 < n ? items[i + 1] : Value());
    d.set("cycle", Value(Function([k](CallArgs& a) {
            if (a.positional.empty()) throw Error("no items for cycling given");
            return a.positional[static_cast<size_t>(k) % a.positional.size()];
          })));
    return Value(std::move(d));
  }

  void define_macro(const Stmt& s) {
    WeakScopes closure(scopes_.begin(), scopes_.end());
    auto keep = keep_;
    const Stmt* macro = &s;
    assign(s.text, Value(Function([closure, keep, macro](CallArgs& a) {
             return Value(call_macro(*macro, closure, keep, a));
           })));
  }

  static std::string call_macro(const Stmt& m, const WeakScopes& closure,
                                const std::shared_ptr<const Body>& keep, CallArgs& a) {
    CallDepthGuard guard;
    Scopes scopes = lock_scopes(closure);
    scopes.push_back(std::make_shared<Frame>());
    std::string text;
    Interpreter sub(scopes, text, keep);
    Frame& frame = *scopes.back();
    List varargs;
    for (size_t i = m.params.size(); i < a.positional.size(); ++i)
      varargs.push_back(a.positional[i]);
    Dict kwargs;
    for (const auto& [k, v] : a.keywords) {
      bool known = k == "caller";
      for (const auto& p : m.params) known = known || p.first == k;
      if (!known) kwargs.set(Value(k), v);
    }
    frame["varargs"] = Value(std::move(varargs));
    frame["kwargs"] = Value(std::move(kwargs));
    for (size_t i = 0; i < m.params.size(); ++i) {
      const auto& [name, def] = m.params[i];
      const Value* given = a.get(name, i);
      frame[name] = given ? *given : def ? sub.eval(*def) : Value();
    }
    if (const Value* caller = a.get("caller", static_cast<size_t>(-1))) frame["caller"] = *caller;
    sub.exec(m.body);
    return text;
  }

  Value call_with_caller(const Stmt& s) {
    const Expr& call = *s.expr;
    if (call.kind != Expr::Kind::call) throw Error("call block needs a macro call");
    Value callee = eval(*call.args[0]);
    CallArgs args = eval_args(call, 1);
    WeakScopes scopes(scopes_.begin(), scopes_.end());
    auto keep = keep_;
    const Body* body = &s.body;
    args.keywords.emplace_back("caller", Value(Function([scopes, keep, body](CallArgs&) {
                                 CallDepthGuard guard;
                                 std::string text;
                                 Interpreter sub(lock_scopes(scopes), text, keep);
                                 sub.exec(*body);
                                 return Value(text);
                               })));
    if (!callee.is_function()) throw Error("call block target is not callable");
    return callee.as_function()(args);
  }

  // Filter chains from `{% filter %}` and `{% set x | f %}` have a null
  // innermost subject, which stands for the rendered body.
  Value apply_filter_chain(const Expr& f, const Value& body) {
    Value subject = f.args[0] ? apply_filter_chain(*f.args[0], body) : body;
    CallArgs args = eval_args(f, 1);
    return apply_filter(f.name, subject, args);
  }

  Value lookup(const std::string& name) const {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      auto found = (*it)->find(name);
      if (found != (*it)->end()) return found->second;
    }
    auto b = builtins().find(name);
    return b != builtins().end() ? b->second : Value();
  }

  CallArgs eval_args(const Expr& e, size_t first) {
    CallArgs args;
    for (size_t i = first; i < e.args.size(); ++i) args.positional.push_back(eval(*e.args[i]));
    for (const auto& [k, v] : e.kwargs) args.keywords.emplace_back(k, eval(*v));
    return args;
  }

  static std::optional<int64_t> bound(const Value& v) {
    if (v.is_none() || v.is_undefined()) return std::nullopt;
    return v.as_int();
  }

 public:
  Value eval(const Expr& e) {
    switch (e.kind) {
      case Expr::Kind::literal:
        return e.value;
      case Expr::Kind::name:
        return lookup(e.name);
      case Expr::Kind::list:
      case Expr::Kind::tuple: {
        List out;
        for (const auto& a : e.args) out.push_back(eval(*a));
        return e.kind == Expr::Kind::tuple ? Value::tuple(std::move(out)) : Value(std::move(out));
      }
      case Expr::Kind::dict: {
        Dict d;
        for (size_t i = 0; i + 1 < e.args.size(); i += 2)
          d.set(eval(*e.args[i]), eval(*e.args[i + 1]));
        return Value(std::move(d));
      }
      case Expr::Kind::attr:
        return get_attr(eval(*e.args[0]), e.name);
      case Expr::Kind::item:
        return get_item(eval(*e.args[0]), eval(*e.args[1]));
      case Expr::Kind::slice: {
        Value obj = eval(*e.args[0]);
        auto part = [&](size_t i) { return e.args[i] ? bound(eval(*e.args[i])) : std::nullopt; };
        return slice(obj, part(1), part(2), part(3));
      }
      case Expr::Kind::call:
        return eval_call(e);
      case Expr::Kind::filter: {
        Value subject = eval(*e.args[0]);
        CallArgs args = eval_args(e, 1);
        return apply_filter(e.name, subject, args);
      }
      case Expr::Kind::test: {
        Value subject = eval(*e.args[0]);
        CallArgs args = eval_args(e, 1);
        return Value(apply_test(e.name, subject, args) != e.negated);
      }
      case Expr::Kind::unary:
        return eval_unary(e);
      case Expr::Kind::binary:
        return eval_binary(e);
      case Expr::Kind::cond:
        if (eval(*e.args[1]).truthy()) return eval(*e.args[0]);
        return e.args[2] ? eval(*e.args[2]) : Value();
    }
    return Value();
  }

 private:
  Value eval_call(const Expr& e) {
    Value callee = eval(*e.args[0]);
    if (!callee.is_function()) {
      std::string what = e.args[0]->kind == Expr::Kind::name   ? "'" + e.args[0]->name + "'"
                         : e.args[0]->kind == Expr::Kind::attr ? "'" + e.args[0]->name + "'"
                                                               : "value";
      throw Error(what + (callee.is_undefined() ? " is undefined" : " is not callable"));
    }
    CallArgs args = eval_args(e, 1);
    return callee.as_function()(args);
  }

  Value eval_unary(const Expr& e) {
    Value v = eval(*e.args[0]);
    if (e.name == "not") return Value(!v.truthy());
    if (!numeric(v))
      throw Error("bad operand type for unary " + e.name + ": '" + std::string(v.type_name()) +
                  "'");
    if (e.name == "+") return v.is_bool() ? Value(v.as_int()) : v;
    return v.is_float() ? Value(-v.as_float()) : Value(-v.as_int());
  }

  Value eval_binary(const Expr& e) {
    const std::string& op = e.name;
    Value l = eval(*e.args[0]);
    if (op == "and") return l.truthy() ? eval(*e.args[1]) : l;
    if (op == "or") return l.truthy() ? l : eval(*e.args[1]);
    Value r = eval(*e.args[1]);
    if (op == "==") return Value(l == r);
    if (op == "!=") return Value(!(l == r));
    if (op == "<") return Value(compare(l, r) < 0);
    if (op == ">") return Value(compare(l, r) > 0);
    if (op == "<=") return Value(compare(l, r) <= 0);
    if (op == ">=") return Value(compare(l, r) >= 0);
    if (op == "in") return Value(contains(r, l));
    if (op == "not in") return Value(!contains(r, l));
    if (op == "~") return Value(l.str() + r.str());
    return arithmetic(op, l, r);
  }

  Scopes scopes_;
  std::string& out_;
  std::shared_ptr<const Body> keep_;  // keeps macro bodies alive in closures
};

}  // namespace

Template::Template(std::string_view source, const LexOptions& options)
    : body_(std::make_shared<const Body>(parse_template(source, options))) {}

std::string Template::render(const Dict& variables) const {
  auto globals = std::make_shared<Frame>();
  for (const auto& [k, v] : variables.items)
    if (k.is_string()) (*globals)[k.as_string()] = v;
  std::string out;
  Interpreter interp({globals, std::make_shared<Frame>()}, out, body_);
  interp.exec(*body_);
  return out;
}

}  // namespace cortiq::jinja
