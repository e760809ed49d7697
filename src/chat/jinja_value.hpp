// The values a Jinja template computes with, modelled on the Python objects
// Jinja2 hands around: undefined, None, bool, int, float, str, list, dict
// (insertion-ordered, like Python's), callables (filters, macros, methods)
// and namespace objects. Lists, dicts and namespaces are shared by
// reference, as in Python, so `ns.x = 1` and `list.append` are seen by
// every holder.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cortiq::jinja {

class Value;
using List = std::vector<Value>;
struct Dict;

// Positional and keyword arguments of a call, as Python sees them.
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keywords;

  // Keyword `name`, else positional `index`, else nullptr.
  const Value* get(std::string_view name, size_t index) const;
};

using Function = std::function<Value(CallArgs&)>;

class Value {
 public:
  enum class Kind { undefined, none, boolean, integer, floating, string, list, dict, function };

  Value() = default;
  static Value none();
  Value(bool b) : kind_(Kind::boolean), int_(b) {}
  Value(int v) : kind_(Kind::integer), int_(v) {}
  Value(int64_t v) : kind_(Kind::integer), int_(v) {}
  Value(double v) : kind_(Kind::floating), float_(v) {}
  Value(std::string s) : kind_(Kind::string), str_(std::make_shared<std::string>(std::move(s))) {}
  Value(std::string_view s) : Value(std::string(s)) {}
  Value(const char* s) : Value(std::string(s)) {}
  Value(List list) : kind_(Kind::list), list_(std::make_shared<List>(std::move(list))) {}
  Value(Dict dict);
  // A Python tuple: a list that prints as (a, b).
  static Value tuple(List items);
  Value(Function fn) : kind_(Kind::function), fn_(std::make_shared<Function>(std::move(fn))) {}

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::undefined; }
  bool is_none() const { return kind_ == Kind::none; }
  bool is_bool() const { return kind_ == Kind::boolean; }
  bool is_int() const { return kind_ == Kind::integer; }
  bool is_float() const { return kind_ == Kind::floating; }
  bool is_number() const { return kind_ == Kind::integer || kind_ == Kind::floating; }
  bool is_string() const { return kind_ == Kind::string; }
  bool is_list() const { return kind_ == Kind::list; }
  bool is_dict() const { return kind_ == Kind::dict; }
  bool is_function() const { return kind_ == Kind::function; }
  bool is_tuple() const { return kind_ == Kind::list && tuple_; }
  // Jinja's Markup (from `safe` or `escape`): text already HTML-safe, which
  // escapes plain text added to it even with autoescape off.
  bool is_markup() const { return kind_ == Kind::string && markup_; }
  static Value markup(std::string text);

  bool as_bool() const { return int_ != 0; }
  int64_t as_int() const { return kind_ == Kind::floating ? static_cast<int64_t>(float_) : int_; }
  double as_float() const { return kind_ == Kind::floating ? float_ : static_cast<double>(int_); }
  const std::string& as_string() const { return *str_; }
  List& as_list() const { return *list_; }
  Dict& as_dict() const { return *dict_; }
  const Function& as_function() const { return *fn_; }

  // Python truthiness: empty containers, 0, "" , None and undefined are false.
  bool truthy() const;
  // Python's str() (what `{{ x }}` prints) and repr().
  std::string str() const;
  std::string repr() const;
  // Python's len(); throws for values without one.
  size_t length() const;
  // Python's ==.
  bool operator==(const Value& other) const;
  // A name for error messages: "int", "list", ...
  std::string_view type_name() const;
  // True when both share the same list / dict object (Python's `is`).
  bool same_object(const Value& other) const;

 private:
  Kind kind_ = Kind::undefined;
  bool tuple_ = false;
  bool markup_ = false;
  int64_t int_ = 0;
  double float_ = 0;
  std::shared_ptr<std::string> str_;
  std::shared_ptr<List> list_;
  std::shared_ptr<Dict> dict_;
  std::shared_ptr<Function> fn_;
};

// An insertion-ordered mapping. Chat dicts are small, so a vector with a
// linear search beats a hash map and keeps the order Python would.
struct Dict {
  std::vector<std::pair<Value, Value>> items;
  // Namespaces print and behave like dicts but take attribute assignment.
  bool is_namespace = false;

  const Value* find(const Value& key) const;
  const Value* find(std::string_view key) const { return find(Value(key)); }
  const Value* find(const char* key) const { return find(Value(key)); }
  void set(Value key, Value value);
};

// Python's repr() of a float: shortest round-trip digits, "1.0", "1e+20".
std::string python_float_repr(double x);

}  // namespace cortiq::jinja
