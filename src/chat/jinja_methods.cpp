// Python methods callable from templates: message.content.strip(),
// tools.items(), ns.list.append(x)...
#include <algorithm>
#include <cctype>

#include <utf8proc.h>

#include "base/error.hpp"
#include "chat/jinja_builtins.hpp"
#include "chat/jinja_ops.hpp"

namespace cortiq::jinja {

namespace {

bool is_py_space(char c) {
  return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f);
}

const Value& arg(CallArgs& a, size_t i, std::string_view method) {
  if (i >= a.positional.size())
    throw Error(std::string(method) + "() takes at least " + std::to_string(i + 1) +
                " argument(s)");
  return a.positional[i];
}

const std::string& str_arg(CallArgs& a, size_t i, std::string_view method) {
  const Value& v = arg(a, i, method);
  if (!v.is_string())
    throw Error(std::string(method) + "() argument must be str, not " + std::string(v.type_name()));
  return v.as_string();
}

std::vector<std::string> py_split(const std::string& s, const Value* sep, int64_t maxsplit) {
  std::vector<std::string> out;
  if (!sep || sep->is_none()) {
    size_t i = 0;
    while (i < s.size()) {
      while (i < s.size() && is_py_space(s[i])) ++i;
      if (i >= s.size()) break;
      if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
        std::string rest = s.substr(i);
        while (!rest.empty() && is_py_space(rest.back())) rest.pop_back();
        out.push_back(rest);
        break;
      }
      size_t j = i;
      while (j < s.size() && !is_py_space(s[j])) ++j;
      out.push_back(s.substr(i, j - i));
      i = j;
    }
    return out;
  }
  const std::string& d = sep->as_string();
  if (d.empty()) throw Error("empty separator");
  size_t start = 0;
  for (;;) {
    size_t p = s.find(d, start);
    if (p == std::string::npos || (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit))
      break;
    out.push_back(s.substr(start, p - start));
    start = p + d.size();
  }
  out.push_back(s.substr(start));
  return out;
}

Value to_list(const std::vector<std::string>& parts) {
  List l;
  for (const auto& p : parts) l.emplace_back(p);
  return Value(std::move(l));
}

bool affix_match(const std::string& s, const Value& affix, bool prefix) {
  auto one = [&](const Value& a) {
    const std::string& x = a.as_string();
    if (x.size() > s.size()) return false;
    return prefix ? s.compare(0, x.size(), x) == 0
                  : s.compare(s.size() - x.size(), x.size(), x) == 0;
  };
  if (affix.is_list()) {
    for (const Value& a : affix.as_list())
      if (a.is_string() && one(a)) return true;
    return false;
  }
  if (!affix.is_string()) throw Error("startswith/endswith argument must be str or a tuple of str");
  return one(affix);
}

std::string py_title(const std::string& s) {
  std::string out = s;
  bool prev_cased = false;
  for (char& c : out) {
    unsigned char u = static_cast<unsigned char>(c);
    if (std::isalpha(u)) {
      c = static_cast<char>(prev_cased ? std::tolower(u) : std::toupper(u));
      prev_cased = true;
    } else {
      prev_cased = u >= 0x80 && prev_cased;
    }
  }
  return out;
}

// str.format with positional `{}` / `{0}` and keyword `{name}` fields.
std::string py_format(const std::string& fmt, CallArgs& a) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    char c = fmt[i];
    if (c == '{' && i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out += '{';
      ++i;
    } else if (c == '}' && i + 1 < fmt.size() && fmt[i + 1] == '}') {
      out += '}';
      ++i;
    } else if (c == '{') {
      size_t close = fmt.find('}', i);
      if (close == std::string::npos) throw Error("Single '{' encountered in format string");
      std::string field = fmt.substr(i + 1, close - i - 1);
      const Value* v = nullptr;
      if (field.empty())
        v = a.get("", auto_index++);
      else if (std::isdigit(static_cast<unsigned char>(field[0])))
        v = a.get("", std::stoul(field));
      else
        v = a.get(field, static_cast<size_t>(-1));
      if (!v) throw Error("format field '" + field + "' has no argument");
      out += v->str();
      i = close;
    } else {
      out += c;
    }
  }
  return out;
}

Value string_method(const std::string& s, std::string_view name) {
  auto m = [](auto fn) { return Value(Function(std::move(fn))); };
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    bool l = name != "rstrip", r = name != "lstrip";
    return m([s, l, r](CallArgs& a) { return Value(py_strip(s, a.get("chars", 0), l, r)); });
  }
  if (name == "upper") return m([s](CallArgs&) { return Value(py_upper(s)); });
  if (name == "lower") return m([s](CallArgs&) { return Value(py_lower(s)); });
  if (name == "title") return m([s](CallArgs&) { return Value(py_title(s)); });
  if (name == "capitalize")
    return m([s](CallArgs&) {
      std::string out = py_lower(s);
      if (!out.empty())
        out[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(out[0])));
      return Value(out);
    });
  if (name == "startswith" || name == "endswith") {
    bool prefix = name == "startswith";
    return m([s, prefix](CallArgs& a) {
      return Value(affix_match(s, arg(a, 0, "startswith"), prefix));
    });
  }
  if (name == "split" || name == "rsplit")
    return m([s](CallArgs& a) {
      const Value* ms = a.get("maxsplit", 1);
      return to_list(py_split(s, a.get("sep", 0), ms ? ms->as_int() : -1));
    });
  if (name == "splitlines")
    return m([s](CallArgs&) {
      auto parts = py_split(s, nullptr, -1);
      std::vector<std::string> lines;
      size_t start = 0;
      for (size_t i = 0; i < s.size(); ++i)
        if (s[i] == '\n') {
          lines.push_back(s.substr(start, i - start - (i > start && s[i - 1] == '\r')));
          start = i + 1;
        }
      if (start < s.size()) lines.push_back(s.substr(start));
      return to_list(lines);
    });
  if (name == "replace")
    return m([s](CallArgs& a) {
      const Value* c = a.get("count", 2);
      return Value(
          py_replace(s, str_arg(a, 0, "replace"), str_arg(a, 1, "replace"), c ? c->as_int() : -1));
    });
  if (name == "count")
    return m([s](CallArgs& a) {
      const std::string& sub = str_arg(a, 0, "count");
      if (sub.empty()) return Value(static_cast<int64_t>(code_points(s).size() + 1));
      int64_t n = 0;
      for (size_t p = s.find(sub); p != std::string::npos; p = s.find(sub, p + sub.size())) ++n;
      return Value(n);
    });
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex") {
    bool rev = name[0] == 'r';
    bool strict = name.find("index") != std::string_view::npos;
    return m([s, rev, strict](CallArgs& a) {
      const std::string& sub = str_arg(a, 0, "find");
      size_t p = rev ? s.rfind(sub) : s.find(sub);
      if (p == std::string::npos) {
        if (strict) throw Error("substring not found");
        return Value(int64_t{-1});
      }
      return Value(static_cast<int64_t>(code_points(s.substr(0, p)).size()));
    });
  }
  if (name == "join")
    return m([s](CallArgs& a) {
      std::string out;
      bool first = true;
      for (const Value& v : iterate(arg(a, 0, "join"))) {
        if (!first) out += s;
        first = false;
        out += v.str();
      }
      return Value(out);
    });
  if (name == "format") return m([s](CallArgs& a) { return Value(py_format(s, a)); });
  if (name == "isdigit" || name == "isalpha" || name == "isalnum" || name == "isspace" ||
      name == "isupper" || name == "islower") {
    std::string n(name);
    return m([s, n](CallArgs&) {
      if (s.empty()) return Value(false);
      bool ok = true;
      for (unsigned char c : s) {
        if (n == "isdigit")
          ok = ok && std::isdigit(c);
        else if (n == "isalpha")
          ok = ok && std::isalpha(c);
        else if (n == "isalnum")
          ok = ok && std::isalnum(c);
        else if (n == "isspace")
          ok = ok && is_py_space(static_cast<char>(c));
        else if (n == "isupper")
          ok = ok && !std::islower(c);
        else
          ok = ok && !std::isupper(c);
      }
      return Value(ok);
    });
  }
  return Value();
}

Value dict_method(const Value& self, std::string_view name) {
  auto m = [](auto fn) { return Value(Function(std::move(fn))); };
  if (name == "items")
    return m([self](CallArgs&) {
      List out;
      for (const auto& [k, v] : self.as_dict().items) out.push_back(Value::tuple(List{k, v}));
      return Value(std::move(out));
    });
  if (name == "keys")
    return m([self](CallArgs&) {
      List out;
      for (const auto& kv : self.as_dict().items) out.push_back(kv.first);
      return Value(std::move(out));
    });
  if (name == "values")
    return m([self](CallArgs&) {
      List out;
      for (const auto& kv : self.as_dict().items) out.push_back(kv.second);
      return Value(std::move(out));
    });
  if (name == "get")
    return m([self](CallArgs& a) {
      const Value* v = self.as_dict().find(arg(a, 0, "get"));
      if (v) return *v;
      const Value* d = a.get("default", 1);
      return d ? *d : Value::none();
    });
  if (name == "copy") return m([self](CallArgs&) { return Value(Dict(self.as_dict())); });
  if (name == "update")
    return m([self](CallArgs& a) {
      if (!a.positional.empty() && a.positional[0].is_dict())
        for (const auto& [k, v] : a.positional[0].as_dict().items) self.as_dict().set(k, v);
      for (const auto& [k, v] : a.keywords) self.as_dict().set(Value(k), v);
      return Value::none();
    });
  return Value();
}

Value list_method(const Value& self, std::string_view name) {
  auto m = [](auto fn) { return Value(Function(std::move(fn))); };
  if (name == "append")
    return m([self](CallArgs& a) {
      self.as_list().push_back(arg(a, 0, "append"));
      return Value::none();
    });
  if (name == "extend")
    return m([self](CallArgs& a) {
      for (const Value& v : iterate(arg(a, 0, "extend"))) self.as_list().push_back(v);
      return Value::none();
    });
  if (name == "pop")
    return m([self](CallArgs& a) {
      List& l = self.as_list();
      if (l.empty()) throw Error("pop from empty list");
      int64_t i = a.positional.empty() ? -1 : a.positional[0].as_int();
      if (i < 0) i += static_cast<int64_t>(l.size());
      if (i < 0 || i >= static_cast<int64_t>(l.size())) throw Error("pop index out of range");
      Value v = l[static_cast<size_t>(i)];
      l.erase(l.begin() + i);
      return v;
    });
  if (name == "index" || name == "count") {
    bool index = name == "index";
    return m([self, index](CallArgs& a) {
      const List& l = self.as_list();
      const Value& x = arg(a, 0, "index");
      if (!index) return Value(static_cast<int64_t>(std::count(l.begin(), l.end(), x)));
      auto it = std::find(l.begin(), l.end(), x);
      if (it == l.end()) throw Error("value is not in list");
      return Value(static_cast<int64_t>(it - l.begin()));
    });
  }
  if (name == "copy") return m([self](CallArgs&) { return Value(List(self.as_list())); });
  return Value();
}

}  // namespace

std::string py_strip(const std::string& s, const Value* chars, bool left, bool right) {
  auto strip_me = [&](char c) {
    if (!chars || chars->is_none()) return is_py_space(c);
    return chars->as_string().find(c) != std::string::npos;
  };
  size_t b = 0, e = s.size();
  if (left)
    while (b < e && strip_me(s[b])) ++b;
  if (right)
    while (e > b && strip_me(s[e - 1])) --e;
  return s.substr(b, e - b);
}

std::string py_replace(const std::string& s, const std::string& from, const std::string& to,
                       int64_t count) {
  if (from.empty()) {
    // Python inserts `to` between every character and at both ends.
    std::string out;
    int64_t n = 0;
    for (const auto& cp : code_points(s)) {
      if (count < 0 || n++ < count) out += to;
      out += cp;
    }
    if (count < 0 || n < count) out += to;
    return out;
  }
  std::string out;
  size_t start = 0;
  int64_t n = 0;
  for (size_t p = s.find(from); p != std::string::npos && (count < 0 || n < count);
       p = s.find(from, start)) {
    out.append(s, start, p - start);
    out += to;
    start = p + from.size();
    ++n;
  }
  out.append(s, start, std::string::npos);
  return out;
}

// Case mapping per code point (utf8proc), so "ÉCOLE".lower() is "école" as
// in Python; ASCII takes the fast path. Invalid UTF-8 is copied unchanged.
static std::string map_case(const std::string& s, utf8proc_int32_t (*map)(utf8proc_int32_t)) {
  std::string out;
  out.reserve(s.size());
  const auto* p = reinterpret_cast<const utf8proc_uint8_t*>(s.data());
  size_t i = 0;
  while (i < s.size()) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      out += static_cast<char>(map(c));
      ++i;
      continue;
    }
    utf8proc_int32_t cp;
    utf8proc_ssize_t n = utf8proc_iterate(p + i, static_cast<utf8proc_ssize_t>(s.size() - i), &cp);
    if (n <= 0) {
      out += s[i++];
      continue;
    }
    utf8proc_uint8_t buf[4];
    utf8proc_ssize_t m = utf8proc_encode_char(map(cp), buf);
    out.append(reinterpret_cast<const char*>(buf), static_cast<size_t>(m));
    i += static_cast<size_t>(n);
  }
  return out;
}

std::string py_lower(std::string s) {
  return map_case(s, utf8proc_tolower);
}

std::string py_upper(std::string s) {
  return map_case(s, utf8proc_toupper);
}

Value bound_method(const Value& object, std::string_view name) {
  switch (object.kind()) {
    case Value::Kind::string:
      return string_method(object.as_string(), name);
    case Value::Kind::dict:
      return dict_method(object, name);
    case Value::Kind::list:
      return list_method(object, name);
    default:
      return Value();
  }
}

}  // namespace cortiq::jinja
