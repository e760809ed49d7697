// Jinja2's builtin filters (plus `tojson` the way Hugging Face defines it).
#include <algorithm>
#include <cctype>
#include <cmath>
#include <unordered_map>

#include "base/error.hpp"
#include "chat/jinja_builtins.hpp"
#include "chat/jinja_json.hpp"
#include "chat/jinja_ops.hpp"

namespace cortiq::jinja {

namespace {

using FilterFn = Value (*)(const Value&, CallArgs&);

const Value* kw(CallArgs& a, std::string_view name, size_t index) {
  return a.get(name, index);
}

std::string text_of(const Value& v) {
  return v.str();
}

// Attribute paths like "function.name" or "0" as Jinja's make_attrgetter reads them.
Value attr_path(const Value& v, const std::string& path) {
  Value cur = v;
  size_t start = 0;
  for (;;) {
    size_t dot = path.find('.', start);
    std::string part =
        path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    bool numeric = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) {
      return std::isdigit(static_cast<unsigned char>(c));
    });
    cur = numeric ? get_item(cur, Value(static_cast<int64_t>(std::stoll(part))))
                  : get_item(cur, Value(part));
    if (dot == std::string::npos) return cur;
    start = dot + 1;
  }
}

Value f_trim(const Value& v, CallArgs& a) {
  return Value(py_strip(text_of(v), kw(a, "chars", 0), true, true));
}

Value f_tojson(const Value& v, CallArgs& a) {
  JsonDumpOptions o;
  // Hugging Face's signature: tojson(x, ensure_ascii=False, indent=None,
  // separators=None, sort_keys=False).
  if (const Value* i = kw(a, "indent", 1); i && !i->is_none())
    o.indent = static_cast<int>(i->as_int());
  if (const Value* s = kw(a, "separators", 2); s && s->is_list() && s->as_list().size() == 2) {
    o.item_separator = s->as_list()[0].as_string();
    o.key_separator = s->as_list()[1].as_string();
  }
  if (const Value* s = kw(a, "sort_keys", 3)) o.sort_keys = s->truthy();
  if (const Value* e = kw(a, "ensure_ascii", 0)) o.ensure_ascii = e->truthy();
  return Value(dump_json(v, o));
}

Value f_length(const Value& v, CallArgs&) {
  return Value(static_cast<int64_t>(v.length()));
}
Value f_lower(const Value& v, CallArgs&) {
  return Value(py_lower(text_of(v)));
}
Value f_upper(const Value& v, CallArgs&) {
  return Value(py_upper(text_of(v)));
}

Value f_capitalize(const Value& v, CallArgs&) {
  std::string s = py_lower(text_of(v));
  if (!s.empty()) s[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(s[0])));
  return Value(s);
}

// Jinja's title: words begin after '-', whitespace or an opening bracket.
Value f_title(const Value& v, CallArgs&) {
  std::string s = text_of(v);
  bool start = true;
  for (char& c : s) {
    unsigned char u = static_cast<unsigned char>(c);
    bool sep = c == '-' || std::isspace(u) || c == '(' || c == '{' || c == '[' || c == '<';
    if (sep) {
      start = true;
      continue;
    }
    c = static_cast<char>(start ? std::toupper(u) : std::tolower(u));
    start = false;
  }
  return Value(s);
}

Value f_replace(const Value& v, CallArgs& a) {
  const Value* from = kw(a, "old", 0);
  const Value* to = kw(a, "new", 1);
  if (!from || !to) throw Error("replace() needs two arguments");
  const Value* count = kw(a, "count", 2);
  return Value(py_replace(text_of(v), from->str(), to->str(),
                          count && !count->is_none() ? count->as_int() : -1));
}

Value f_join(const Value& v, CallArgs& a) {
  const Value* sep = kw(a, "d", 0);
  const Value* attr = kw(a, "attribute", 1);
  std::string out;
  bool first = true;
  for (const Value& item : iterate(v)) {
    if (!first && sep) out += sep->str();
    first = false;
    out += (attr && !attr->is_none() ? attr_path(item, attr->str()) : item).str();
  }
  return Value(out);
}

Value f_default(const Value& v, CallArgs& a) {
  const Value* dflt = kw(a, "default_value", 0);
  const Value* boolean = kw(a, "boolean", 1);
  bool use_default = v.is_undefined() || (boolean && boolean->truthy() && !v.truthy());
  if (!use_default) return v;
  return dflt ? *dflt : Value("");
}

Value f_first(const Value& v, CallArgs&) {
  auto items = iterate(v);
  return items.empty() ? Value() : items.front();
}

Value f_last(const Value& v, CallArgs&) {
  auto items = iterate(v);
  return items.empty() ? Value() : items.back();
}

Value f_items(const Value& v, CallArgs&) {
  if (v.is_undefined()) return Value(List{});
  if (!v.is_dict()) throw Error("items filter needs a mapping, got " + std::string(v.type_name()));
  List out;
  for (const auto& [k, val] : v.as_dict().items) out.push_back(Value::tuple(List{k, val}));
  return Value(std::move(out));
}

Value f_list(const Value& v, CallArgs&) {
  return Value(List(iterate(v)));
}

Value f_string(const Value& v, CallArgs&) {
  return Value(text_of(v));
}
Value f_safe(const Value& v, CallArgs&) {
  return v.is_markup() ? v : Value::markup(text_of(v));
}

Value f_escape(const Value& v, CallArgs&) {
  return v.is_markup() ? v : Value::markup(html_escape(text_of(v)));
}

bool parse_number_text(const std::string& text, double& out, bool& integral) {
  std::string s = py_strip(text, nullptr, true, true);
  if (s.empty()) return false;
  char* end = nullptr;
  long long n = std::strtoll(s.c_str(), &end, 10);
  if (*end == '\0') {
    out = static_cast<double>(n);
    integral = true;
    return true;
  }
  out = std::strtod(s.c_str(), &end);
  integral = false;
  return *end == '\0';
}

Value f_int(const Value& v, CallArgs& a) {
  const Value* dflt = kw(a, "default", 0);
  Value fallback = dflt ? *dflt : Value(int64_t{0});
  if (v.is_int() || v.is_bool()) return Value(v.as_int());
  if (v.is_float()) return Value(static_cast<int64_t>(v.as_float()));
  if (v.is_string()) {
    std::string s = py_strip(v.as_string(), nullptr, true, true);
    char* end = nullptr;
    long long n = std::strtoll(s.c_str(), &end, 10);
    if (!s.empty() && *end == '\0') return Value(static_cast<int64_t>(n));
    double d;
    bool integral;
    if (parse_number_text(s, d, integral)) return Value(static_cast<int64_t>(d));
  }
  return fallback;
}

Value f_float(const Value& v, CallArgs& a) {
  const Value* dflt = kw(a, "default", 0);
  if (v.is_number() || v.is_bool()) return Value(v.as_float());
  double d;
  bool integral;
  if (v.is_string() && parse_number_text(v.as_string(), d, integral)) return Value(d);
  return dflt ? *dflt : Value(0.0);
}

Value f_abs(const Value& v, CallArgs&) {
  if (v.is_float()) return Value(std::fabs(v.as_float()));
  if (v.is_int() || v.is_bool()) return Value(v.as_int() < 0 ? -v.as_int() : v.as_int());
  throw Error("bad operand type for abs(): '" + std::string(v.type_name()) + "'");
}

Value f_round(const Value& v, CallArgs& a) {
  const Value* p = kw(a, "precision", 0);
  const Value* method = kw(a, "method", 1);
  int64_t prec = p ? p->as_int() : 0;
  double scale = std::pow(10.0, static_cast<double>(prec));
  double x = v.as_float() * scale;
  std::string m = method ? method->str() : "common";
  double r = m == "ceil" ? std::ceil(x) : m == "floor" ? std::floor(x) : std::nearbyint(x);
  return Value(r / scale);
}

Value f_indent(const Value& v, CallArgs& a) {
  const Value* width = kw(a, "width", 0);
  const Value* first = kw(a, "first", 1);
  const Value* blank = kw(a, "blank", 2);
  std::string pad = width && width->is_string()
                        ? width->as_string()
                        : std::string(static_cast<size_t>(width ? width->as_int() : 4), ' ');
  std::string s = text_of(v);
  std::string out;
  size_t start = 0;
  bool is_first = true;
  for (;;) {
    size_t nl = s.find('\n', start);
    std::string line = s.substr(start, nl == std::string::npos ? std::string::npos : nl - start);
    bool indent =
        is_first ? (first && first->truthy()) : (!line.empty() || (blank && blank->truthy()));
    if (indent) out += pad;
    out += line;
    if (nl == std::string::npos) break;
    out += '\n';
    start = nl + 1;
    is_first = false;
  }
  return Value(out);
}

Value f_unique(const Value& v, CallArgs&) {
  List out;
  for (const Value& x : iterate(v))
    if (std::find(out.begin(), out.end(), x) == out.end()) out.push_back(x);
  return Value(std::move(out));
}

// Jinja sorts strings case-insensitively unless told otherwise.
Value sort_key(const Value& v, bool case_sensitive) {
  return !case_sensitive && v.is_string() ? Value(py_lower(v.as_string())) : v;
}

Value f_sort(const Value& v, CallArgs& a) {
  const Value* rev = kw(a, "reverse", 0);
  const Value* cs = kw(a, "case_sensitive", 1);
  const Value* attr = kw(a, "attribute", 2);
  bool case_sensitive = cs && cs->truthy();
  List items = iterate(v);
  auto key = [&](const Value& x) {
    return sort_key(attr && !attr->is_none() ? attr_path(x, attr->str()) : x, case_sensitive);
  };
  std::stable_sort(items.begin(), items.end(),
                   [&](const Value& x, const Value& y) { return compare(key(x), key(y)) < 0; });
  if (rev && rev->truthy()) std::reverse(items.begin(), items.end());
  return Value(std::move(items));
}

Value f_dictsort(const Value& v, CallArgs& a) {
  const Value* cs = kw(a, "case_sensitive", 0);
  const Value* by = kw(a, "by", 1);
  const Value* rev = kw(a, "reverse", 2);
  bool case_sensitive = cs && cs->truthy();
  size_t pos = by && by->str() == "value" ? 1 : 0;
  CallArgs none;
  List items = f_items(v, none).as_list();
  std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
    return compare(sort_key(x.as_list()[pos], case_sensitive),
                   sort_key(y.as_list()[pos], case_sensitive)) < 0;
  });
  if (rev && rev->truthy()) std::reverse(items.begin(), items.end());
  return Value(std::move(items));
}

Value f_reverse(const Value& v, CallArgs&) {
  if (v.is_string()) return slice(v, std::nullopt, std::nullopt, -1);
  List items = iterate(v);
  std::reverse(items.begin(), items.end());
  return Value(std::move(items));
}

Value f_batch(const Value& v, CallArgs& a) {
  const Value* n = kw(a, "linecount", 0);
  const Value* fill = kw(a, "fill_with", 1);
  int64_t size = n ? n->as_int() : 1;
  if (size <= 0) throw Error("batch size must be positive");
  List out, cur;
  for (const Value& x : iterate(v)) {
    cur.push_back(x);
    if (static_cast<int64_t>(cur.size()) == size) out.emplace_back(std::exchange(cur, {}));
  }
  if (!cur.empty()) {
    if (fill && !fill->is_none())
      while (static_cast<int64_t>(cur.size()) < size) cur.push_back(*fill);
    out.emplace_back(std::move(cur));
  }
  return Value(std::move(out));
}

Value select_impl(const Value& v, CallArgs& a, bool by_attr, bool keep) {
  size_t next = 0;
  std::string attr;
  if (by_attr) {
    if (a.positional.empty()) throw Error("selectattr needs an attribute name");
    attr = a.positional[next++].str();
  }
  std::string test = next < a.positional.size() ? a.positional[next++].str() : "";
  CallArgs test_args;
  test_args.positional.assign(
      a.positional.begin() + static_cast<long>(std::min(next, a.positional.size())),
      a.positional.end());
  List out;
  if (!v.truthy()) return Value(std::move(out));  // Jinja skips None and undefined
  for (const Value& x : iterate(v)) {
    Value subject = by_attr ? attr_path(x, attr) : x;
    bool pass = test.empty() ? subject.truthy() : apply_test(test, subject, test_args);
    if (pass == keep) out.push_back(x);
  }
  return Value(std::move(out));
}

Value f_selectattr(const Value& v, CallArgs& a) {
  return select_impl(v, a, true, true);
}
Value f_rejectattr(const Value& v, CallArgs& a) {
  return select_impl(v, a, true, false);
}
Value f_select(const Value& v, CallArgs& a) {
  return select_impl(v, a, false, true);
}
Value f_reject(const Value& v, CallArgs& a) {
  return select_impl(v, a, false, false);
}

Value f_map(const Value& v, CallArgs& a) {
  List out;
  if (!v.truthy()) return Value(std::move(out));  // Jinja maps None to nothing
  if (const Value* attr = kw(a, "attribute", 99)) {
    const Value* dflt = kw(a, "default", 99);
    for (const Value& x : iterate(v)) {
      Value r = attr_path(x, attr->str());
      out.push_back(r.is_undefined() && dflt ? *dflt : r);
    }
    return Value(std::move(out));
  }
  if (a.positional.empty()) throw Error("map needs a filter name or attribute=");
  std::string filter = a.positional[0].str();
  CallArgs rest;
  rest.positional.assign(a.positional.begin() + 1, a.positional.end());
  rest.keywords = a.keywords;
  for (const Value& x : iterate(v)) out.push_back(apply_filter(filter, x, rest));
  return Value(std::move(out));
}

Value minmax(const Value& v, CallArgs& a, bool want_max) {
  const Value* cs = kw(a, "case_sensitive", 0);
  const Value* attr = kw(a, "attribute", 1);
  bool case_sensitive = cs && cs->truthy();
  auto items = iterate(v);
  if (items.empty()) return Value();
  auto key = [&](const Value& x) {
    return sort_key(attr && !attr->is_none() ? attr_path(x, attr->str()) : x, case_sensitive);
  };
  Value best = items[0];
  for (const Value& x : items) {
    int c = compare(key(x), key(best));
    if (want_max ? c > 0 : c < 0) best = x;
  }
  return best;
}

Value f_max(const Value& v, CallArgs& a) {
  return minmax(v, a, true);
}
Value f_min(const Value& v, CallArgs& a) {
  return minmax(v, a, false);
}

Value f_sum(const Value& v, CallArgs& a) {
  const Value* attr = kw(a, "attribute", 0);
  const Value* start = kw(a, "start", 1);
  Value total = start ? *start : Value(int64_t{0});
  for (const Value& x : iterate(v)) {
    Value y = attr && !attr->is_none() ? attr_path(x, attr->str()) : x;
    total = total.is_float() || y.is_float() ? Value(total.as_float() + y.as_float())
                                             : Value(total.as_int() + y.as_int());
  }
  return total;
}

Value f_wordcount(const Value& v, CallArgs&) {
  CallArgs none;
  return Value(static_cast<int64_t>(
      bound_method(Value(text_of(v)), "split").as_function()(none).as_list().size()));
}

Value f_center(const Value& v, CallArgs& a) {
  const Value* w = kw(a, "width", 0);
  std::string s = text_of(v);
  int64_t width = w ? w->as_int() : 80;
  int64_t len = static_cast<int64_t>(Value(s).length());
  if (width <= len) return Value(s);
  int64_t total = width - len;
  int64_t left = total / 2 + (total & width & 1);
  return Value(std::string(static_cast<size_t>(left), ' ') + s +
               std::string(static_cast<size_t>(total - left), ' '));
}

const std::unordered_map<std::string_view, FilterFn>& filters() {
  static const std::unordered_map<std::string_view, FilterFn> table = {
      {"trim", f_trim},
      {"tojson", f_tojson},
      {"length", f_length},
      {"count", f_length},
      {"lower", f_lower},
      {"upper", f_upper},
      {"capitalize", f_capitalize},
      {"title", f_title},
      {"replace", f_replace},
      {"join", f_join},
      {"default", f_default},
      {"d", f_default},
      {"first", f_first},
      {"last", f_last},
      {"items", f_items},
      {"list", f_list},
      {"string", f_string},
      {"safe", f_safe},
      {"e", f_escape},
      {"escape", f_escape},
      {"int", f_int},
      {"float", f_float},
      {"abs", f_abs},
      {"round", f_round},
      {"indent", f_indent},
      {"unique", f_unique},
      {"sort", f_sort},
      {"dictsort", f_dictsort},
      {"reverse", f_reverse},
      {"batch", f_batch},
      {"selectattr", f_selectattr},
      {"rejectattr", f_rejectattr},
      {"select", f_select},
      {"reject", f_reject},
      {"map", f_map},
      {"max", f_max},
      {"min", f_min},
      {"sum", f_sum},
      {"wordcount", f_wordcount},
      {"center", f_center},
  };
  return table;
}

}  // namespace

std::string html_escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

Value apply_filter(std::string_view name, const Value& subject, CallArgs& args) {
  auto it = filters().find(name);
  if (it == filters().end()) throw Error("unknown filter '" + std::string(name) + "'");
  return it->second(subject, args);
}

}  // namespace cortiq::jinja
