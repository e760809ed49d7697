#include "grammar/gbnf_parser.hpp"

#include <algorithm>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/error.hpp"
#include "base/strings.hpp"

namespace cortiq::grammar {

namespace {

// {m,n} beyond this is refused: each count is a copy of the item.
constexpr uint32_t kMaxRepetition = 10000;
constexpr uint32_t kUnbounded = UINT32_MAX;
// Groups open at once: each is a level of the parser's recursion.
constexpr uint32_t kMaxNesting = 256;

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_';
}

class GbnfParser {
 public:
  explicit GbnfParser(std::string_view text) : text_(text) {}

  Grammar parse(std::string_view root_name) {
    skip_space(true);
    while (pos_ < text_.size()) {
      parse_rule();
      skip_space(true);
    }
    for (size_t id = 0; id < grammar_.rules.size(); ++id) {
      if (!defined_at_[id]) {
        fail(first_use_[id], "rule '" + grammar_.rules[id].name + "' is used but never defined");
      }
    }
    const auto root = rule_ids_.find(std::string(root_name));
    if (root == rule_ids_.end()) {
      throw Error("the grammar has no '" + std::string(root_name) + "' rule (where it starts)");
    }
    grammar_.root = root->second;
    check_no_left_recursion(grammar_);
    return std::move(grammar_);
  }

 private:
  [[noreturn]] void fail(size_t at, const std::string& problem) const {
    const size_t line = 1 + std::count(text_.begin(), text_.begin() + at, '\n');
    const size_t line_start = at == 0 ? std::string_view::npos : text_.rfind('\n', at - 1);
    const size_t column = line_start == std::string_view::npos ? at + 1 : at - line_start;
    throw Error(strfmt("grammar line %zu, column %zu: %s", line, column, problem.c_str()));
  }

  char peek(size_t ahead = 0) const {
    return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0';
  }
  bool at_end() const { return pos_ >= text_.size(); }

  // Spaces, tabs and comments; newlines too where a rule goes on over them.
  void skip_space(bool newlines) {
    while (!at_end()) {
      const char c = peek();
      if (c == ' ' || c == '\t' || c == '\r' || (newlines && c == '\n')) {
        ++pos_;
      } else if (c == '#') {
        while (!at_end() && peek() != '\n') ++pos_;
      } else {
        break;
      }
    }
  }

  std::string parse_name() {
    const size_t start = pos_;
    while (!at_end() && is_name_char(peek())) ++pos_;
    if (pos_ == start) fail(start, "expected a rule name");
    return std::string(text_.substr(start, pos_ - start));
  }

  uint32_t rule_id(const std::string& name, size_t used_at) {
    const auto [it, added] =
        rule_ids_.try_emplace(name, static_cast<uint32_t>(grammar_.rules.size()));
    if (added) {
      grammar_.rules.push_back({name, {}});
      defined_at_.push_back(0);
      first_use_.push_back(used_at);
    }
    return it->second;
  }

  // A rule of the parser's own (a group, a repetition): not found by name.
  uint32_t new_rule(const std::string& base, std::vector<Alternative> alternatives) {
    const auto id = static_cast<uint32_t>(grammar_.rules.size());
    grammar_.rules.push_back({base + "_" + std::to_string(++generated_), std::move(alternatives)});
    defined_at_.push_back(1);
    first_use_.push_back(0);
    return id;
  }

  uint32_t char_set_id(CharSet set) {
    set.normalize();
    const auto [it, added] =
        char_set_ids_.try_emplace({set.negated, set.ranges}, grammar_.char_sets.size());
    if (added) grammar_.char_sets.push_back(std::move(set));
    return static_cast<uint32_t>(it->second);
  }

  Symbol one_char(uint32_t cp) {
    CharSet set;
    set.ranges.push_back({cp, cp});
    return {Symbol::Kind::chars, char_set_id(std::move(set))};
  }

  void parse_rule() {
    const size_t start = pos_;
    const std::string name = parse_name();
    skip_space(false);
    if (text_.substr(pos_, 3) != "::=")
      fail(pos_, "expected '::=' after the rule name '" + name + "'");
    pos_ += 3;
    const uint32_t id = rule_id(name, start);
    if (defined_at_[id]) {
      fail(start, strfmt("rule '%s' is defined twice (first at line %zu)", name.c_str(),
                         1 + std::count(text_.begin(), text_.begin() + defined_at_[id] - 1, '\n')));
    }
    defined_at_[id] = start + 1;
    skip_space(true);
    grammar_.rules[id].alternatives = parse_alternates(name, false);
    skip_space(false);
    if (!at_end() && peek() != '\n') {
      fail(pos_, std::string("unexpected '") + peek() + "' (a rule ends at the end of its line)");
    }
  }

  std::vector<Alternative> parse_alternates(const std::string& rule, bool nested) {
    std::vector<Alternative> alternatives;
    alternatives.push_back(parse_sequence(rule, nested));
    while (peek() == '|') {
      ++pos_;
      skip_space(true);
      alternatives.push_back(parse_sequence(rule, nested));
    }
    return alternatives;
  }

  Alternative parse_sequence(const std::string& rule, bool nested) {
    Alternative sequence;
    while (!at_end()) {
      std::vector<Symbol> item;
      if (!parse_primary(rule, item)) break;
      skip_space(nested);
      item = parse_repetition(rule, std::move(item));
      skip_space(nested);
      sequence.insert(sequence.end(), item.begin(), item.end());
    }
    return sequence;
  }

  // One literal, class, any-character, group or rule name into `item`;
  // false (nothing read) at what ends a sequence.
  bool parse_primary(const std::string& rule, std::vector<Symbol>& item) {
    const char c = peek();
    if (c == '"') {
      const size_t start = pos_++;
      while (peek() != '"') {
        if (at_end()) fail(start, "unterminated literal");
        item.push_back(one_char(parse_char()));
      }
      ++pos_;
      // "" is the empty string: no symbols.
      return true;
    }
    if (c == '[') {
      item.push_back({Symbol::Kind::chars, char_set_id(parse_class())});
      return true;
    }
    if (c == '.') {
      ++pos_;
      CharSet any;
      any.negated = true;
      item.push_back({Symbol::Kind::chars, char_set_id(std::move(any))});
      return true;
    }
    if (c == '(') {
      const size_t start = pos_++;
      if (++depth_ > kMaxNesting) fail(start, strfmt("groups nested deeper than %u", kMaxNesting));
      skip_space(true);
      std::vector<Alternative> alternatives = parse_alternates(rule, true);
      skip_space(true);
      if (peek() != ')') fail(at_end() ? start : pos_, "expected ')' to close the group");
      ++pos_;
      --depth_;
      item.push_back({Symbol::Kind::rule, new_rule(rule, std::move(alternatives))});
      return true;
    }
    if (c == '<') fail(pos_, "token references (<...>) are not supported; write the text");
    if (is_name_char(c)) {
      const size_t start = pos_;
      const std::string name = parse_name();
      item.push_back({Symbol::Kind::rule, rule_id(name, start)});
      return true;
    }
    return false;
  }

  CharSet parse_class() {
    const size_t start = pos_++;
    CharSet set;
    if (peek() == '^') {
      set.negated = true;
      ++pos_;
    }
    while (peek() != ']') {
      if (at_end() || peek() == '\n') fail(start, "unterminated character class");
      const uint32_t first = parse_char();
      uint32_t last = first;
      if (peek() == '-' && peek(1) != ']') {
        ++pos_;
        if (at_end()) fail(start, "unterminated character class");
        const size_t at = pos_;
        last = parse_char();
        if (last < first) fail(at, "the range's end comes before its start");
      }
      set.ranges.push_back({first, last});
    }
    ++pos_;
    if (set.ranges.empty() && !set.negated) fail(start, "an empty character class matches nothing");
    return set;
  }

  // One character of a literal or class: an escape or a UTF-8 sequence.
  uint32_t parse_char() {
    const size_t start = pos_;
    const auto c = static_cast<unsigned char>(peek());
    if (c == '\\') {
      ++pos_;
      const char e = peek();
      ++pos_;
      switch (e) {
        case 'n':
          return '\n';
        case 'r':
          return '\r';
        case 't':
          return '\t';
        case '\\':
        case '"':
        case '[':
        case ']':
        case '-':
        case '/':
        case '^':
          return static_cast<uint32_t>(e);
        case 'x':
          return parse_hex(2, start);
        case 'u':
          return parse_hex(4, start);
        case 'U':
          return parse_hex(8, start);
        default:
          fail(start, std::string("unknown escape '\\") + (e ? std::string(1, e) : "") + "'");
      }
    }
    if (c < 0x80) {
      ++pos_;
      return c;
    }
    // A UTF-8 sequence: its lead byte gives its length.
    const int length = c >= 0xF0 && c < 0xF5   ? 4
                       : c >= 0xE0 && c < 0xF0 ? 3
                       : c >= 0xC2 && c < 0xE0 ? 2
                                               : 0;
    if (length == 0 || pos_ + length > text_.size()) fail(start, "invalid UTF-8");
    uint32_t cp = c & (0x7F >> length);
    for (int i = 1; i < length; ++i) {
      const auto next = static_cast<unsigned char>(text_[pos_ + i]);
      if ((next & 0xC0) != 0x80) fail(start, "invalid UTF-8");
      cp = (cp << 6) | (next & 0x3F);
    }
    pos_ += length;
    const uint32_t least[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < least[length] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
      fail(start, "invalid UTF-8");
    }
    return cp;
  }

  uint32_t parse_hex(int digits, size_t start) {
    uint32_t value = 0;
    for (int i = 0; i < digits; ++i) {
      const char h = peek();
      int v = -1;
      if (h >= '0' && h <= '9') v = h - '0';
      if (h >= 'a' && h <= 'f') v = h - 'a' + 10;
      if (h >= 'A' && h <= 'F') v = h - 'A' + 10;
      if (v < 0) fail(start, strfmt("the escape needs %d hexadecimal digits", digits));
      value = value * 16 + static_cast<uint32_t>(v);
      ++pos_;
    }
    if (value > 0x10FFFF || (value >= 0xD800 && value <= 0xDFFF)) {
      fail(start, strfmt("U+%X is not a Unicode scalar value", value));
    }
    return value;
  }

  uint32_t parse_count() {
    const size_t start = pos_;
    uint64_t value = 0;
    while (peek() >= '0' && peek() <= '9') {
      value = value * 10 + static_cast<uint64_t>(peek() - '0');
      if (value > kMaxRepetition) {
        fail(start, strfmt("a repetition count above %u", kMaxRepetition));
      }
      ++pos_;
    }
    return static_cast<uint32_t>(value);
  }

  // *, +, ?, {m}, {m,}, {m,n}, {,n} after an item.
  std::vector<Symbol> parse_repetition(const std::string& rule, std::vector<Symbol> item) {
    uint32_t min = 1, max = 1;
    const char c = peek();
    if (c == '*' || c == '+' || c == '?') {
      ++pos_;
      min = c == '+' ? 1 : 0;
      max = c == '?' ? 1 : kUnbounded;
    } else if (c == '{') {
      const size_t start = pos_++;
      skip_space(false);
      const bool has_min = peek() >= '0' && peek() <= '9';
      min = has_min ? parse_count() : 0;
      skip_space(false);
      if (peek() == ',') {
        ++pos_;
        skip_space(false);
        max = peek() >= '0' && peek() <= '9' ? parse_count() : kUnbounded;
        skip_space(false);
        if (!has_min && max == kUnbounded) fail(start, "'{,}' gives no count");
      } else {
        if (!has_min) fail(start, "expected a count in '{...}'");
        max = min;
      }
      if (peek() != '}') fail(start, "expected '}' to close the repetition");
      ++pos_;
      if (max < min) fail(start, "the repetition's maximum is below its minimum");
    } else {
      return item;
    }
    if (item.empty()) return item;  // "" repeated is still the empty string
    if (item.size() > 1) item = {{Symbol::Kind::rule, new_rule(rule, {item})}};
    std::vector<Symbol> out;
    for (uint32_t i = 0; i < min; ++i) out.push_back(item[0]);
    if (max == kUnbounded) {
      // star ::= item star | ""
      const uint32_t star = new_rule(rule, {});
      grammar_.rules[star].alternatives = {{item[0], {Symbol::Kind::rule, star}}, {}};
      out.push_back({Symbol::Kind::rule, star});
    } else if (max > min) {
      // Nested optionals, so that each count has one parse:
      // opt_1 ::= item | "", opt_k ::= item opt_(k-1) | "".
      uint32_t inner = new_rule(rule, {{item[0]}, {}});
      for (uint32_t k = 2; k <= max - min; ++k) {
        inner = new_rule(rule, {{item[0], {Symbol::Kind::rule, inner}}, {}});
      }
      out.push_back({Symbol::Kind::rule, inner});
    }
    return out;
  }

  std::string_view text_;
  size_t pos_ = 0;
  Grammar grammar_;
  std::unordered_map<std::string, uint32_t> rule_ids_;
  std::vector<size_t> defined_at_;  // 1 + the offset of its definition; 0: not yet
  std::vector<size_t> first_use_;   // offset of the first reference (for the error)
  std::map<std::pair<bool, std::vector<std::pair<uint32_t, uint32_t>>>, size_t> char_set_ids_;
  uint32_t generated_ = 0;
  uint32_t depth_ = 0;  // groups open
};

}  // namespace

Grammar parse_gbnf(std::string_view text, std::string_view root) {
  return GbnfParser(text).parse(root);
}

}  // namespace cortiq::grammar
