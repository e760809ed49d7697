// A strict JSON syntax check for tests (RFC 8259 grammar, no extensions):
// enough to say that what a command printed parses, without a JSON library.
#pragma once

#include <cctype>
#include <string_view>

namespace cortiq::test {

class JsonSyntax {
 public:
  // True when `text` is exactly one JSON value (surrounded by whitespace).
  static bool valid(std::string_view text) {
    JsonSyntax p(text);
    p.space();
    if (!p.value()) return false;
    p.space();
    return p.pos_ == text.size();
  }

 private:
  explicit JsonSyntax(std::string_view text) : s_(text) {}

  bool value() {
    if (depth_ > 256 || pos_ >= s_.size()) return false;
    switch (s_[pos_]) {
      case '{':
        return object();
      case '[':
        return array();
      case '"':
        return string();
      case 't':
        return word("true");
      case 'f':
        return word("false");
      case 'n':
        return word("null");
      default:
        return number();
    }
  }
  bool object() {
    ++pos_, ++depth_;
    space();
    if (eat('}')) return --depth_, true;
    do {
      space();
      if (!string()) return false;
      space();
      if (!eat(':')) return false;
      space();
      if (!value()) return false;
      space();
    } while (eat(','));
    return eat('}') && (--depth_, true);
  }
  bool array() {
    ++pos_, ++depth_;
    space();
    if (eat(']')) return --depth_, true;
    do {
      space();
      if (!value()) return false;
      space();
    } while (eat(','));
    return eat(']') && (--depth_, true);
  }
  bool string() {
    if (!eat('"')) return false;
    while (pos_ < s_.size()) {
      const unsigned char c = static_cast<unsigned char>(s_[pos_++]);
      if (c == '"') return true;
      if (c < 0x20) return false;
      if (c != '\\') continue;
      if (pos_ >= s_.size()) return false;
      const char e = s_[pos_++];
      if (e == 'u') {
        for (int i = 0; i < 4; ++i) {
          if (pos_ >= s_.size() || !std::isxdigit(static_cast<unsigned char>(s_[pos_++])))
            return false;
        }
      } else if (std::string_view("\"\\/bfnrt").find(e) == std::string_view::npos) {
        return false;
      }
    }
    return false;
  }
  bool number() {
    const size_t start = pos_;
    eat('-');
    if (eat('0')) {
    } else if (!digits()) {
      return false;
    }
    if (eat('.') && !digits()) return false;
    if (eat('e') || eat('E')) {
      if (!eat('+')) eat('-');
      if (!digits()) return false;
    }
    return pos_ > start;
  }
  bool digits() {
    const size_t start = pos_;
    while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) ++pos_;
    return pos_ > start;
  }
  bool word(std::string_view w) {
    if (s_.substr(pos_, w.size()) != w) return false;
    pos_ += w.size();
    return true;
  }
  bool eat(char c) {
    if (pos_ < s_.size() && s_[pos_] == c) return ++pos_, true;
    return false;
  }
  void space() {
    while (pos_ < s_.size() &&
           (s_[pos_] == ' ' || s_[pos_] == '\n' || s_[pos_] == '\r' || s_[pos_] == '\t'))
      ++pos_;
  }

  std::string_view s_;
  size_t pos_ = 0;
  int depth_ = 0;
};

}  // namespace cortiq::test
