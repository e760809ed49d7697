#include "chat/jinja_ops.hpp"

#include <algorithm>

#include "base/error.hpp"
#include "chat/jinja_builtins.hpp"

namespace cortiq::jinja {

std::vector<std::string> code_points(const std::string& text) {
  std::vector<std::string> out;
  for (size_t i = 0; i < text.size();) {
    size_t n = 1;
    unsigned char c = static_cast<unsigned char>(text[i]);
    if (c >= 0xF0)
      n = 4;
    else if (c >= 0xE0)
      n = 3;
    else if (c >= 0xC0)
      n = 2;
    n = std::min(n, text.size() - i);
    out.push_back(text.substr(i, n));
    i += n;
  }
  return out;
}

Value get_attr(const Value& object, std::string_view name) {
  if (object.is_dict()) {
    const Dict& d = object.as_dict();
    if (!d.is_namespace) {
      Value method = bound_method(object, name);
      if (!method.is_undefined()) return method;
    }
    const Value* v = d.find(name);
    return v ? *v : Value();
  }
  return bound_method(object, name);
}

Value get_item(const Value& object, const Value& key) {
  if (object.is_dict()) {
    if (const Value* v = object.as_dict().find(key)) return *v;
    return key.is_string() && !object.as_dict().is_namespace ? bound_method(object, key.as_string())
                                                             : Value();
  }
  if ((object.is_list() || object.is_string()) && (key.is_int() || key.is_bool())) {
    int64_t i = key.as_int();
    if (object.is_list()) {
      const List& l = object.as_list();
      int64_t n = static_cast<int64_t>(l.size());
      if (i < 0) i += n;
      return i >= 0 && i < n ? l[static_cast<size_t>(i)] : Value();
    }
    auto cps = code_points(object.as_string());
    int64_t n = static_cast<int64_t>(cps.size());
    if (i < 0) i += n;
    return i >= 0 && i < n ? Value(cps[static_cast<size_t>(i)]) : Value();
  }
  if (key.is_string()) return bound_method(object, key.as_string());
  return Value();
}

namespace {

// Python's slice.indices(): clamps bounds for a sequence of length n.
std::vector<size_t> slice_indices(int64_t n, std::optional<int64_t> start,
                                  std::optional<int64_t> stop, std::optional<int64_t> step) {
  int64_t st = step.value_or(1);
  if (st == 0) throw Error("slice step cannot be zero");
  auto clamp = [&](std::optional<int64_t> v, int64_t dflt) {
    if (!v) return dflt;
    int64_t x = *v;
    if (x < 0) x += n;
    if (st > 0) return std::clamp<int64_t>(x, 0, n);
    return std::clamp<int64_t>(x, -1, n - 1);
  };
  int64_t b = clamp(start, st > 0 ? 0 : n - 1);
  int64_t e = clamp(stop, st > 0 ? n : -1);
  std::vector<size_t> idx;
  for (int64_t i = b; st > 0 ? i < e : i > e; i += st) idx.push_back(static_cast<size_t>(i));
  return idx;
}

}  // namespace

Value slice(const Value& object, std::optional<int64_t> start, std::optional<int64_t> stop,
            std::optional<int64_t> step) {
  if (object.is_list()) {
    const List& l = object.as_list();
    List out;
    for (size_t i : slice_indices(static_cast<int64_t>(l.size()), start, stop, step))
      out.push_back(l[i]);
    return Value(std::move(out));
  }
  if (object.is_string()) {
    auto cps = code_points(object.as_string());
    std::string out;
    for (size_t i : slice_indices(static_cast<int64_t>(cps.size()), start, stop, step))
      out += cps[i];
    return Value(std::move(out));
  }
  if (object.is_undefined()) return Value();
  throw Error("'" + std::string(object.type_name()) + "' object is not subscriptable");
}

int compare(const Value& a, const Value& b) {
  if ((a.is_number() || a.is_bool()) && (b.is_number() || b.is_bool())) {
    if (a.is_float() || b.is_float()) {
      double x = a.as_float(), y = b.as_float();
      return x < y ? -1 : x > y ? 1 : 0;
    }
    int64_t x = a.as_int(), y = b.as_int();
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a.is_string() && b.is_string()) {
    int c = a.as_string().compare(b.as_string());
    return c < 0 ? -1 : c > 0 ? 1 : 0;
  }
  if (a.is_list() && b.is_list()) {
    const List &x = a.as_list(), &y = b.as_list();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i)
      if (int c = compare(x[i], y[i])) return c;
    return x.size() < y.size() ? -1 : x.size() > y.size() ? 1 : 0;
  }
  throw Error("'<' not supported between instances of '" + std::string(a.type_name()) + "' and '" +
              std::string(b.type_name()) + "'");
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Value::Kind::string:
      if (!item.is_string())
        throw Error("'in <string>' requires string as left operand, not " +
                    std::string(item.type_name()));
      return container.as_string().find(item.as_string()) != std::string::npos;
    case Value::Kind::list:
      return std::find(container.as_list().begin(), container.as_list().end(), item) !=
             container.as_list().end();
    case Value::Kind::dict:
      return container.as_dict().find(item) != nullptr;
    case Value::Kind::undefined:
      return false;
    default:
      throw Error("argument of type '" + std::string(container.type_name()) + "' is not iterable");
  }
}

std::vector<Value> iterate(const Value& value) {
  switch (value.kind()) {
    case Value::Kind::undefined:
      return {};
    case Value::Kind::list:
      return value.as_list();
    case Value::Kind::dict: {
      std::vector<Value> keys;
      for (const auto& kv : value.as_dict().items) keys.push_back(kv.first);
      return keys;
    }
    case Value::Kind::string: {
      std::vector<Value> out;
      for (auto& cp : code_points(value.as_string())) out.emplace_back(std::move(cp));
      return out;
    }
    default:
      throw Error("'" + std::string(value.type_name()) + "' object is not iterable");
  }
}

}  // namespace cortiq::jinja
