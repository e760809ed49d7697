#include "chat/jinja_json.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>

#include "base/error.hpp"

namespace cortiq::jinja {
namespace {

// One UTF-8 sequence starting at s[i] as a code point; advances i. Bytes
// that do not start a valid sequence come back as themselves.
uint32_t next_code_point(const std::string& s, size_t& i) {
  auto c = static_cast<unsigned char>(s[i]);
  size_t n = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
  if (n == 1 || i + n > s.size()) {
    ++i;
    return c;
  }
  uint32_t cp = c & (0x3F >> (n - 1));
  for (size_t k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  i += n;
  return cp;
}

// ensure_ascii=True: non-ASCII as \uXXXX, astral planes as surrogate pairs.
void append_ascii_escape(std::string& out, uint32_t cp) {
  char buf[16];
  if (cp >= 0x10000) {
    cp -= 0x10000;
    snprintf(buf, sizeof buf, "\\u%04x\\u%04x", 0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF));
  } else {
    snprintf(buf, sizeof buf, "\\u%04x", cp);
  }
  out += buf;
}

void quote(std::string& out, const std::string& s, bool ensure_ascii) {
  out += '"';
  for (size_t i = 0; i < s.size();) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80 && ensure_ascii) {
      append_ascii_escape(out, next_code_point(s, i));
      continue;
    }
    ++i;
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
}

// Object keys become strings the way Python's json module converts them.
std::string key_text(const Value& key) {
  switch (key.kind()) {
    case Value::Kind::string:
      return key.as_string();
    case Value::Kind::boolean:
      return key.as_bool() ? "true" : "false";
    case Value::Kind::none:
      return "null";
    case Value::Kind::integer:
    case Value::Kind::floating:
      return key.repr();
    default:
      throw Error("keys must be str, int, float, bool or None, not " +
                  std::string(key.type_name()));
  }
}

class Dumper {
 public:
  explicit Dumper(const JsonDumpOptions& o) : opt_(o) {
    item_sep_ = o.item_separator.value_or(o.indent ? "," : ", ");
    key_sep_ = o.key_separator.value_or(": ");
  }

  void dump(const Value& v, int depth) {
    switch (v.kind()) {
      case Value::Kind::undefined:
      case Value::Kind::none:
        out_ += "null";
        return;
      case Value::Kind::boolean:
        out_ += v.as_bool() ? "true" : "false";
        return;
      case Value::Kind::integer:
        out_ += std::to_string(v.as_int());
        return;
      case Value::Kind::floating:
        return dump_float(v.as_float());
      case Value::Kind::string:
        return quote(out_, v.as_string(), opt_.ensure_ascii);
      case Value::Kind::list:
        return dump_list(v.as_list(), depth);
      case Value::Kind::dict:
        return dump_dict(v.as_dict(), depth);
      case Value::Kind::function:
        throw Error("Object of type function is not JSON serializable");
    }
  }

  std::string take() { return std::move(out_); }

 private:
  void dump_float(double x) {
    if (std::isnan(x))
      out_ += "NaN";
    else if (std::isinf(x))
      out_ += x > 0 ? "Infinity" : "-Infinity";
    else
      out_ += python_float_repr(x);
  }

  void newline(int depth) {
    if (!opt_.indent) return;
    out_ += '\n';
    out_.append(static_cast<size_t>(*opt_.indent) * static_cast<size_t>(depth), ' ');
  }

  void dump_list(const List& list, int depth) {
    if (list.empty()) {
      out_ += "[]";
      return;
    }
    out_ += '[';
    for (size_t i = 0; i < list.size(); ++i) {
      if (i) out_ += item_sep_;
      newline(depth + 1);
      dump(list[i], depth + 1);
    }
    newline(depth);
    out_ += ']';
  }

  void dump_dict(const Dict& dict, int depth) {
    if (dict.items.empty()) {
      out_ += "{}";
      return;
    }
    std::vector<const std::pair<Value, Value>*> items;
    for (const auto& kv : dict.items) items.push_back(&kv);
    if (opt_.sort_keys)
      std::stable_sort(items.begin(), items.end(),
                       [](auto* a, auto* b) { return key_text(a->first) < key_text(b->first); });
    out_ += '{';
    for (size_t i = 0; i < items.size(); ++i) {
      if (i) out_ += item_sep_;
      newline(depth + 1);
      quote(out_, key_text(items[i]->first), opt_.ensure_ascii);
      out_ += key_sep_;
      dump(items[i]->second, depth + 1);
    }
    newline(depth);
    out_ += '}';
  }

  const JsonDumpOptions& opt_;
  std::string item_sep_, key_sep_;
  std::string out_;
};

}  // namespace

std::string dump_json(const Value& value, const JsonDumpOptions& options) {
  Dumper d(options);
  d.dump(value, 0);
  return d.take();
}

Value value_from_json(const Json& json) {
  switch (json.type) {
    case Json::Type::null:
      return Value::none();
    case Json::Type::boolean:
      return Value(json.boolean);
    case Json::Type::integer:
      return Value(json.integer);
    case Json::Type::number:
      return Value(json.number);
    case Json::Type::string:
      return Value(json.string);
    case Json::Type::array: {
      List list;
      list.reserve(json.array.size());
      for (const Json& item : json.array) list.push_back(value_from_json(item));
      return Value(std::move(list));
    }
    case Json::Type::object: {
      Dict dict;
      for (const auto& [k, v] : json.object) dict.set(Value(k), value_from_json(v));
      return Value(std::move(dict));
    }
  }
  return Value();
}

}  // namespace cortiq::jinja
