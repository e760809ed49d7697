#include "chat/jinja_value.hpp"

#include <charconv>
#include <cmath>
#include <stdexcept>

#include "base/error.hpp"

namespace cortiq::jinja {

const Value* CallArgs::get(std::string_view name, size_t index) const {
  for (const auto& [key, value] : keywords)
    if (key == name) return &value;
  return index < positional.size() ? &positional[index] : nullptr;
}

Value Value::none() {
  Value v;
  v.kind_ = Kind::none;
  return v;
}

Value::Value(Dict dict) : kind_(Kind::dict), dict_(std::make_shared<Dict>(std::move(dict))) {}

Value Value::markup(std::string text) {
  Value v(std::move(text));
  v.markup_ = true;
  return v;
}

Value Value::tuple(List items) {
  Value v(std::move(items));
  v.tuple_ = true;
  return v;
}

bool Value::truthy() const {
  switch (kind_) {
    case Kind::undefined:
    case Kind::none:
      return false;
    case Kind::boolean:
    case Kind::integer:
      return int_ != 0;
    case Kind::floating:
      return float_ != 0;
    case Kind::string:
      return !str_->empty();
    case Kind::list:
      return !list_->empty();
    case Kind::dict:
      return !dict_->items.empty() || dict_->is_namespace;
    case Kind::function:
      return true;
  }
  return false;
}

std::string python_float_repr(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, x);
  std::string s(buf, res.ptr);
  // Python switches to exponent form outside [1e-4, 1e16) and always keeps
  // a decimal point or exponent so the text reads back as a float.
  double mag = std::fabs(x);
  if (mag != 0 && (mag >= 1e16 || mag < 1e-4)) {
    res = std::to_chars(buf, buf + sizeof buf, x, std::chars_format::scientific);
    s.assign(buf, res.ptr);
    size_t e = s.find('e');
    std::string mant = s.substr(0, e), exp = s.substr(e + 1);
    char sign = exp[0] == '-' ? '-' : '+';
    if (exp[0] == '-' || exp[0] == '+') exp.erase(0, 1);
    while (exp.size() > 2 && exp[0] == '0') exp.erase(0, 1);
    if (exp.size() < 2) exp.insert(0, "0");
    return mant + "e" + sign + exp;
  }
  if (s.find_first_of(".e") == std::string::npos) {
    res = std::to_chars(buf, buf + sizeof buf, x, std::chars_format::fixed);
    s.assign(buf, res.ptr);
    if (s.find('.') == std::string::npos) s += ".0";
  }
  return s;
}

static std::string repr_string(const std::string& s) {
  // Python prefers single quotes unless the text holds one and no double.
  bool has_single = s.find('\'') != std::string::npos;
  bool has_double = s.find('"') != std::string::npos;
  char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (unsigned char c : s) {
    if (c == '\\')
      out += "\\\\";
    else if (c == quote)
      out += std::string("\\") + static_cast<char>(c);
    else if (c == '\n')
      out += "\\n";
    else if (c == '\r')
      out += "\\r";
    else if (c == '\t')
      out += "\\t";
    else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else
      out += static_cast<char>(c);
  }
  out += quote;
  return out;
}

std::string Value::str() const {
  switch (kind_) {
    case Kind::undefined:
      return "";
    case Kind::string:
      return *str_;
    default:
      return repr();
  }
}

std::string Value::repr() const {
  switch (kind_) {
    case Kind::undefined:
      return "";
    case Kind::none:
      return "None";
    case Kind::boolean:
      return int_ ? "True" : "False";
    case Kind::integer:
      return std::to_string(int_);
    case Kind::floating:
      return python_float_repr(float_);
    case Kind::string:
      return repr_string(*str_);
    case Kind::function:
      return "<function>";
    case Kind::list: {
      std::string out = tuple_ ? "(" : "[";
      for (size_t i = 0; i < list_->size(); ++i) {
        if (i) out += ", ";
        out += (*list_)[i].repr();
      }
      if (tuple_) return out + (list_->size() == 1 ? ",)" : ")");
      return out + "]";
    }
    case Kind::dict: {
      std::string out = dict_->is_namespace ? "<Namespace {" : "{";
      bool first = true;
      for (const auto& [k, v] : dict_->items) {
        if (!first) out += ", ";
        first = false;
        out += k.repr() + ": " + v.repr();
      }
      return out + (dict_->is_namespace ? "}>" : "}");
    }
  }
  return "";
}

size_t Value::length() const {
  switch (kind_) {
    case Kind::undefined:
      return 0;
    case Kind::string: {
      // Python counts code points, not bytes.
      size_t n = 0;
      for (unsigned char c : *str_) n += (c & 0xC0) != 0x80;
      return n;
    }
    case Kind::list:
      return list_->size();
    case Kind::dict:
      return dict_->items.size();
    default:
      throw Error("object of type '" + std::string(type_name()) + "' has no len()");
  }
}

bool Value::operator==(const Value& o) const {
  if (is_number() || is_bool()) {
    if (!(o.is_number() || o.is_bool())) return false;
    if (is_float() || o.is_float()) return as_float() == o.as_float();
    return int_ == o.int_;
  }
  if (kind_ != o.kind_) return false;
  switch (kind_) {
    case Kind::undefined:
    case Kind::none:
      return true;
    case Kind::string:
      return *str_ == *o.str_;
    case Kind::list:
      return *list_ == *o.list_;
    case Kind::dict: {
      if (dict_->items.size() != o.dict_->items.size()) return false;
      for (const auto& [k, v] : dict_->items) {
        const Value* other = o.dict_->find(k);
        if (!other || !(*other == v)) return false;
      }
      return true;
    }
    case Kind::function:
      return fn_ == o.fn_;
    default:
      return false;
  }
}

std::string_view Value::type_name() const {
  switch (kind_) {
    case Kind::undefined:
      return "undefined";
    case Kind::none:
      return "NoneType";
    case Kind::boolean:
      return "bool";
    case Kind::integer:
      return "int";
    case Kind::floating:
      return "float";
    case Kind::string:
      return "str";
    case Kind::list:
      return "list";
    case Kind::dict:
      return dict_->is_namespace ? "Namespace" : "dict";
    case Kind::function:
      return "function";
  }
  return "?";
}

bool Value::same_object(const Value& o) const {
  if (kind_ != o.kind_) return false;
  if (is_list()) return list_ == o.list_;
  if (is_dict()) return dict_ == o.dict_;
  if (is_function()) return fn_ == o.fn_;
  return *this == o;
}

const Value* Dict::find(const Value& key) const {
  for (const auto& [k, v] : items)
    if (k == key) return &v;
  return nullptr;
}

void Dict::set(Value key, Value value) {
  for (auto& [k, v] : items)
    if (k == key) {
      v = std::move(value);
      return;
    }
  items.emplace_back(std::move(key), std::move(value));
}

}  // namespace cortiq::jinja
