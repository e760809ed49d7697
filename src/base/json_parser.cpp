#include "base/json_parser.hpp"

#include <cerrno>
#include <cstdlib>

#include "base/error.hpp"
#include "base/json_writer.hpp"
#include "base/utf8.hpp"

namespace cortiq {

const Json* Json::find(std::string_view key) const {
  for (const auto& [k, v] : object)
    if (k == key) return &v;
  return nullptr;
}

namespace {

constexpr int kMaxDepth = 512;

class JsonReader {
 public:
  explicit JsonReader(std::string_view text) : s_(text) {}

  Json document() {
    Json v = value(0);
    skip_space();
    if (pos_ != s_.size()) fail("unexpected trailing characters");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw Error("JSON at offset " + std::to_string(pos_) + ": " + what);
  }

  void skip_space() {
    while (pos_ < s_.size() &&
           (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r'))
      ++pos_;
  }

  bool literal(std::string_view word) {
    if (s_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }

  Json value(int depth) {
    if (depth > kMaxDepth) fail("nesting too deep");
    skip_space();
    if (pos_ >= s_.size()) fail("unexpected end of input");
    Json v;
    char c = s_[pos_];
    if (c == '{') return object(depth);
    if (c == '[') return array(depth);
    if (c == '"') {
      v.type = Json::Type::string;
      v.string = string();
    } else if (literal("true") || literal("false")) {
      v.type = Json::Type::boolean;
      v.boolean = s_[pos_ - 1] == 'e' && s_[pos_ - 2] == 'u';
    } else if (literal("null")) {
      v.type = Json::Type::null;
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      v = number();
    } else {
      fail(std::string("unexpected character '") + c + "'");
    }
    return v;
  }

  Json object(int depth) {
    Json v;
    v.type = Json::Type::object;
    ++pos_;
    skip_space();
    if (pos_ < s_.size() && s_[pos_] == '}') {
      ++pos_;
      return v;
    }
    for (;;) {
      skip_space();
      if (pos_ >= s_.size() || s_[pos_] != '"') fail("expected a member name");
      std::string key = string();
      skip_space();
      if (pos_ >= s_.size() || s_[pos_] != ':') fail("expected ':'");
      ++pos_;
      v.object.emplace_back(std::move(key), value(depth + 1));
      skip_space();
      if (pos_ < s_.size() && s_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < s_.size() && s_[pos_] == '}') {
        ++pos_;
        return v;
      }
      fail("expected ',' or '}'");
    }
  }

  Json array(int depth) {
    Json v;
    v.type = Json::Type::array;
    ++pos_;
    skip_space();
    if (pos_ < s_.size() && s_[pos_] == ']') {
      ++pos_;
      return v;
    }
    for (;;) {
      v.array.push_back(value(depth + 1));
      skip_space();
      if (pos_ < s_.size() && s_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < s_.size() && s_[pos_] == ']') {
        ++pos_;
        return v;
      }
      fail("expected ',' or ']'");
    }
  }

  Json number() {
    size_t start = pos_;
    bool integral = true;
    if (s_[pos_] == '-') ++pos_;
    if (pos_ >= s_.size() || !isdigit(s_[pos_])) fail("bad number");
    if (s_[pos_] == '0')
      ++pos_;
    else
      while (pos_ < s_.size() && isdigit(s_[pos_])) ++pos_;
    if (pos_ < s_.size() && s_[pos_] == '.') {
      integral = false;
      ++pos_;
      if (pos_ >= s_.size() || !isdigit(s_[pos_])) fail("bad number");
      while (pos_ < s_.size() && isdigit(s_[pos_])) ++pos_;
    }
    if (pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
      integral = false;
      ++pos_;
      if (pos_ < s_.size() && (s_[pos_] == '+' || s_[pos_] == '-')) ++pos_;
      if (pos_ >= s_.size() || !isdigit(s_[pos_])) fail("bad number");
      while (pos_ < s_.size() && isdigit(s_[pos_])) ++pos_;
    }
    std::string text(s_.substr(start, pos_ - start));
    Json v;
    if (integral) {
      errno = 0;
      long long n = std::strtoll(text.c_str(), nullptr, 10);
      if (errno != ERANGE) {
        v.type = Json::Type::integer;
        v.integer = n;
        return v;
      }
    }
    v.type = Json::Type::number;
    v.number = std::strtod(text.c_str(), nullptr);
    return v;
  }

  static bool isdigit(char c) { return c >= '0' && c <= '9'; }

  uint32_t hex4() {
    if (pos_ + 4 > s_.size()) fail("truncated \\u escape");
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      char h = s_[pos_++];
      int d = h >= '0' && h <= '9'   ? h - '0'
              : h >= 'a' && h <= 'f' ? h - 'a' + 10
              : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                     : -1;
      if (d < 0) fail("bad \\u escape");
      v = v * 16 + static_cast<uint32_t>(d);
    }
    return v;
  }

  std::string string() {
    ++pos_;  // opening quote
    std::string out;
    for (;;) {
      if (pos_ >= s_.size()) fail("unterminated string");
      char c = s_[pos_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) fail("control character in string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= s_.size()) fail("unterminated string");
      char e = s_[pos_++];
      switch (e) {
        case '"':
          out += '"';
          break;
        case '\\':
          out += '\\';
          break;
        case '/':
          out += '/';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'u': {
          uint32_t cp = hex4();
          // A surrogate pair encodes one code point above U+FFFF; a lone
          // surrogate becomes U+FFFD so the text stays valid UTF-8.
          if (cp >= 0xD800 && cp < 0xDC00 && s_.substr(pos_, 2) == "\\u") {
            size_t save = pos_;
            pos_ += 2;
            uint32_t lo = hex4();
            if (lo >= 0xDC00 && lo < 0xE000)
              cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            else
              pos_ = save, cp = 0xFFFD;
          } else if (cp >= 0xD800 && cp < 0xE000) {
            cp = 0xFFFD;
          }
          append_utf8(out, cp);
          break;
        }
        default:
          fail(std::string("bad escape '\\") + e + "'");
      }
    }
  }

  std::string_view s_;
  size_t pos_ = 0;
};

}  // namespace

Json parse_json(std::string_view text) {
  return JsonReader(text).document();
}

namespace {

void write_json(JsonWriter& out, const Json& v) {
  switch (v.type) {
    case Json::Type::null:
      out.null();
      break;
    case Json::Type::boolean:
      out.value(v.boolean);
      break;
    case Json::Type::integer:
      out.value(v.integer);
      break;
    case Json::Type::number:
      out.value(v.number);
      break;
    case Json::Type::string:
      out.value(std::string_view(v.string));
      break;
    case Json::Type::array:
      out.begin_array();
      for (const Json& item : v.array) write_json(out, item);
      out.end_array();
      break;
    case Json::Type::object:
      out.begin_object();
      for (const auto& [key, item] : v.object) {
        out.key(key);
        write_json(out, item);
      }
      out.end_object();
      break;
  }
}

}  // namespace

std::string to_compact_json(const Json& value) {
  JsonWriter out;
  write_json(out, value);
  return out.take();
}

}  // namespace cortiq
