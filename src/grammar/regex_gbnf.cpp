#include "grammar/regex_gbnf.hpp"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "base/error.hpp"
#include "base/strings.hpp"
#include "base/utf8.hpp"
#include "grammar/gbnf_text.hpp"
#include "grammar/grammar.hpp"

namespace cortiq::grammar {

namespace {

constexpr uint32_t kMaxCodePoint = 0x10FFFF;
constexpr int64_t kMaxCount = 10000;  // what the GBNF reader accepts in {m,n}

using Ranges = std::vector<std::pair<uint32_t, uint32_t>>;

Ranges normalized(Ranges ranges) {
  CharSet set{std::move(ranges), false};
  set.normalize();
  return std::move(set.ranges);
}

Ranges complement(const Ranges& sorted) {
  Ranges out;
  uint32_t next = 0;
  for (const auto& [first, last] : sorted) {
    if (first > next) out.push_back({next, first - 1});
    next = last + 1;
  }
  if (next <= kMaxCodePoint) out.push_back({next, kMaxCodePoint});
  return out;
}

// ECMAScript's \s: WhiteSpace and LineTerminator.
const Ranges& space_ranges() {
  static const Ranges ranges = normalized({{'\t', '\r'},
                                           {' ', ' '},
                                           {0xA0, 0xA0},
                                           {0x1680, 0x1680},
                                           {0x2000, 0x200A},
                                           {0x2028, 0x2029},
                                           {0x202F, 0x202F},
                                           {0x205F, 0x205F},
                                           {0x3000, 0x3000},
                                           {0xFEFF, 0xFEFF}});
  return ranges;
}

// The JSON string text of one character that JSON must escape.
std::string json_escape(uint32_t cp) {
  switch (cp) {
    case '"':
      return "\\\"";
    case '\\':
      return "\\\\";
    case '\n':
      return "\\n";
    case '\r':
      return "\\r";
    case '\t':
      return "\\t";
    case '\b':
      return "\\b";
    case '\f':
      return "\\f";
    default:
      return strfmt("\\u%04x", cp);
  }
}

// A GBNF literal of JSON string text (ASCII: what json_escape writes).
std::string literal(std::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

bool must_escape(uint32_t cp) {
  return cp < 0x20 || cp == '"' || cp == '\\';
}

Ranges intersection(const Ranges& a, const Ranges& b) {
  Ranges out;
  for (const auto& [a_first, a_last] : a) {
    for (const auto& [b_first, b_last] : b) {
      const uint32_t first = std::max(a_first, b_first);
      const uint32_t last = std::min(a_last, b_last);
      if (first <= last) out.push_back({first, last});
    }
  }
  return normalized(std::move(out));
}

// The JSON string text of a set of characters (sorted, disjoint ranges):
// those written as they are in one class, those JSON escapes as
// alternatives. Surrogates are not characters.
std::string set_gbnf(const Ranges& ranges) {
  static const Ranges escaped_chars = normalized({{0, 0x1F}, {'"', '"'}, {'\\', '\\'}});
  static const Ranges plain_chars =
      intersection(complement(escaped_chars), complement(Ranges{{0xD800, 0xDFFF}}));
  std::vector<std::string> alternatives;
  std::string plain;
  for (const auto& [first, last] : intersection(ranges, plain_chars)) {
    plain += gbnf_char(first);
    if (last > first) plain.append("-").append(gbnf_char(last));
  }
  if (!plain.empty()) alternatives.push_back("[" + plain + "]");
  for (const auto& [first, last] : intersection(ranges, escaped_chars)) {
    for (uint32_t cp = first; cp <= last; ++cp) alternatives.push_back(literal(json_escape(cp)));
  }
  if (alternatives.empty()) throw Error("the pattern has a character class that matches nothing");
  if (alternatives.size() == 1) return alternatives[0];
  std::string out = "(";
  for (size_t i = 0; i < alternatives.size(); ++i) out += (i ? " | " : "") + alternatives[i];
  return out + ")";
}

class RegexConverter {
 public:
  RegexConverter(std::string_view pattern, std::string_view any_char)
      : pattern_(pattern), any_char_(any_char) {}

  std::string convert() {
    std::vector<std::string> branches;
    do {
      const bool anchored_start = eat('^');
      std::string body = sequence(/*top=*/true);
      const bool anchored_end = ended_with_dollar_;
      ended_with_dollar_ = false;
      const std::string any = "(" + any_char_ + ")*";
      if (!anchored_start) body = any + " " + body;
      if (!anchored_end) body += " " + any;
      branches.push_back(body);
    } while (eat('|'));
    if (!at_end()) fail("unmatched ')'");
    return group(branches);
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw Error(strfmt("pattern \"%s\", offset %zu: %s", std::string(pattern_).c_str(), pos_,
                       what.c_str()));
  }
  bool at_end() const { return pos_ >= pattern_.size(); }
  char peek(size_t ahead = 0) const {
    return pos_ + ahead < pattern_.size() ? pattern_[pos_ + ahead] : '\0';
  }
  bool eat(char c) {
    if (peek() != c || at_end()) return false;
    ++pos_;
    return true;
  }

  static std::string group(const std::vector<std::string>& alternatives) {
    if (alternatives.size() == 1) return "(" + alternatives[0] + ")";
    std::string out = "(";
    for (size_t i = 0; i < alternatives.size(); ++i) out += (i ? " | " : "") + alternatives[i];
    return out + ")";
  }

  std::string alternation() {
    std::vector<std::string> branches{sequence(false)};
    while (eat('|')) branches.push_back(sequence(false));
    return group(branches);
  }

  std::string sequence(bool top) {
    std::string out;
    while (!at_end() && peek() != '|' && peek() != ')') {
      if (peek() == '$') {
        ++pos_;
        if (!top || !(at_end() || peek() == '|')) fail("'$' only at the end of the pattern");
        ended_with_dollar_ = true;
        break;
      }
      if (peek() == '^') fail("'^' only at the start of the pattern");
      std::string atom_text = atom();
      atom_text += quantifier();
      out += (out.empty() ? "" : " ") + atom_text;
    }
    return out;
  }

  std::string quantifier() {
    std::string q;
    const char c = peek();
    if (c == '*' || c == '+' || c == '?') {
      ++pos_;
      q = std::string(1, c);
    } else if (c == '{' && counted()) {
      ++pos_;
      const int64_t lo = number();
      int64_t hi = lo;
      bool open = false;
      if (eat(',')) {
        if (peek() == '}') {
          open = true;
        } else {
          hi = number();
        }
      }
      if (!eat('}')) fail("expected '}'");
      if (!open && hi < lo) fail("the repetition's maximum is below its minimum");
      q = open ? strfmt("{%lld,}", static_cast<long long>(lo))
          : lo == hi
              ? strfmt("{%lld}", static_cast<long long>(lo))
              : strfmt("{%lld,%lld}", static_cast<long long>(lo), static_cast<long long>(hi));
    } else {
      return "";
    }
    eat('?');  // lazy: the same strings
    if (peek() == '*' || peek() == '+' || peek() == '?' || (peek() == '{' && counted())) {
      fail("nothing to repeat");
    }
    return q;
  }

  // Whether a '{' here starts {n}, {n,} or {n,m}.
  bool counted() const {
    size_t i = pos_ + 1;
    auto digits = [&] {
      const size_t start = i;
      while (i < pattern_.size() && pattern_[i] >= '0' && pattern_[i] <= '9') ++i;
      return i > start;
    };
    if (!digits()) return false;
    if (i < pattern_.size() && pattern_[i] == ',') {
      ++i;
      digits();
    }
    return i < pattern_.size() && pattern_[i] == '}';
  }

  int64_t number() {
    int64_t n = 0;
    while (peek() >= '0' && peek() <= '9') {
      n = n * 10 + (peek() - '0');
      if (n > kMaxCount)
        fail(strfmt("repetition counts above %lld are not supported",
                    static_cast<long long>(kMaxCount)));
      ++pos_;
    }
    return n;
  }

  std::string atom() {
    const char c = peek();
    if (c == '*' || c == '+' || c == '?') fail("nothing to repeat");
    if (c == '(') {
      ++pos_;
      if (eat('?')) {
        if (eat(':')) {
        } else if (peek() == '<' && peek(1) != '=' && peek(1) != '!') {
          while (!at_end() && peek() != '>') ++pos_;
          if (!eat('>')) fail("unterminated group name");
        } else {
          fail("lookahead and lookbehind cannot be expressed in a grammar");
        }
      }
      std::string inner = alternation();
      if (!eat(')')) fail("expected ')'");
      return inner;
    }
    if (c == '[') return set_gbnf(char_class());
    if (c == '.') {
      ++pos_;
      // Any character but the line terminators.
      return set_gbnf(complement(normalized({{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}})));
    }
    if (c == '\\') {
      const Ranges set = escape(/*in_class=*/false);
      if (set.size() == 1 && set[0].first == set[0].second) return character(set[0].first);
      return set_gbnf(set);
    }
    if (c == '{' || c == '}' || c == ']') fail(strfmt("a lone '%c' (escape it as \\%c)", c, c));
    return character(next_code_point());
  }

  std::string character(uint32_t cp) {
    if (must_escape(cp)) return literal(json_escape(cp));
    return strfmt("\"%s\"", gbnf_char(cp).c_str());
  }

  uint32_t next_code_point() {
    const size_t length = utf8_sequence_length(static_cast<unsigned char>(pattern_[pos_]));
    if (pos_ + length > pattern_.size()) fail("invalid UTF-8");
    return next_utf8(pattern_, pos_);
  }

  uint32_t hex(size_t digits) {
    uint32_t value = 0;
    for (size_t i = 0; i < digits; ++i) {
      const char h = peek();
      int v = -1;
      if (h >= '0' && h <= '9') v = h - '0';
      if (h >= 'a' && h <= 'f') v = h - 'a' + 10;
      if (h >= 'A' && h <= 'F') v = h - 'A' + 10;
      if (v < 0) fail("expected a hexadecimal digit");
      value = value * 16 + static_cast<uint32_t>(v);
      ++pos_;
    }
    return value;
  }

  // After a backslash: the set of characters the escape stands for.
  Ranges escape(bool in_class) {
    ++pos_;  // the backslash
    if (at_end()) fail("the pattern ends in a backslash");
    const char e = pattern_[pos_++];
    auto one = [](uint32_t cp) { return Ranges{{cp, cp}}; };
    switch (e) {
      case 'd':
        return {{'0', '9'}};
      case 'D':
        return complement({{'0', '9'}});
      case 'w':
        return normalized({{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}});
      case 'W':
        return complement(normalized({{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}}));
      case 's':
        return space_ranges();
      case 'S':
        return complement(space_ranges());
      case 'n':
        return one('\n');
      case 'r':
        return one('\r');
      case 't':
        return one('\t');
      case 'f':
        return one('\f');
      case 'v':
        return one('\v');
      case '0':
        return one(0);
      case 'x':
        return one(hex(2));
      case 'u':
        if (eat('{')) {
          uint32_t cp = 0;
          size_t digits = 0;
          while (peek() != '}') {
            cp = cp * 16 + hex(1);
            if (++digits > 6 || cp > kMaxCodePoint) fail("\\u{...} beyond U+10FFFF");
          }
          ++pos_;
          if (digits == 0) fail("empty \\u{}");
          return one(cp);
        }
        return one(hex(4));
      case 'b':
        if (in_class) return one('\b');
        fail("word boundaries (\\b) cannot be expressed in a grammar");
      case 'B':
        fail("word boundaries (\\B) cannot be expressed in a grammar");
      case 'p':
      case 'P':
        fail("Unicode property escapes (\\p{...}) are not supported");
      case 'k':
        fail("backreferences cannot be expressed in a grammar");
      default:
        if (e >= '1' && e <= '9') fail("backreferences cannot be expressed in a grammar");
        if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z')) {
          fail(strfmt("unknown escape \\%c", e));
        }
        --pos_;
        return one(next_code_point());  // \. \* \/ ...: the character itself
    }
  }

  Ranges char_class() {
    ++pos_;  // '['
    const bool negated = eat('^');
    Ranges set;
    while (true) {
      if (at_end()) fail("unterminated character class");
      if (peek() == ']') {
        ++pos_;
        break;
      }
      Ranges item = class_atom();
      if (peek() == '-' && peek(1) != ']' && peek(1) != '\0') {
        ++pos_;
        Ranges last = class_atom();
        if (item.size() != 1 || item[0].first != item[0].second || last.size() != 1 ||
            last[0].first != last[0].second) {
          fail("a range between classes (such as \\d-z)");
        }
        if (last[0].first < item[0].first) fail("the range's end comes before its start");
        item = {{item[0].first, last[0].first}};
      }
      set.insert(set.end(), item.begin(), item.end());
    }
    set = normalized(std::move(set));
    return negated ? complement(set) : set;
  }

  Ranges class_atom() {
    if (peek() == '\\') return escape(/*in_class=*/true);
    const uint32_t cp = next_code_point();
    return {{cp, cp}};
  }

  std::string_view pattern_;
  std::string any_char_;
  size_t pos_ = 0;
  bool ended_with_dollar_ = false;
};

}  // namespace

std::string json_string_pattern_gbnf(std::string_view pattern, std::string_view any_char_rule) {
  return RegexConverter(pattern, any_char_rule).convert();
}

}  // namespace cortiq::grammar
