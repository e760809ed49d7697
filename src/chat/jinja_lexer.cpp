#include "chat/jinja_lexer.hpp"

#include <cctype>
#include <cstdint>

#include "base/error.hpp"
#include "base/utf8.hpp"

namespace cortiq::jinja {
namespace {

[[noreturn]] void fail(int line, const std::string& what) {
  throw Error("template line " + std::to_string(line) + ": " + what);
}

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

class Lexer {
 public:
  Lexer(std::string_view src, const LexOptions& opt) : src_(src), opt_(opt) {}

  std::vector<Token> run() {
    while (pos_ < src_.size()) lex_text_and_tag();
    flush_text();
    tokens_.push_back({Token::Kind::eof, "", line_});
    return std::move(tokens_);
  }

 private:
  // Text up to the next tag, then the tag itself.
  void lex_text_and_tag() {
    size_t start = pos_;
    size_t tag = find_tag(start);
    bool line_starting = start == 0 || src_[start - 1] == '\n';
    std::string text(src_.substr(start, tag - start));
    if (strip_next_) {
      size_t k = 0;
      while (k < text.size() && is_space(text[k])) ++k;
      text.erase(0, k);
      strip_next_ = false;
    }
    count_lines(start, tag);
    pos_ = tag;
    if (tag >= src_.size()) {
      pending_text_ += text;
      return;
    }
    char kind = src_[tag + 1];
    char modifier = tag + 2 < src_.size() ? src_[tag + 2] : '\0';
    if (modifier == '-') {
      while (!text.empty() && is_space(text.back())) text.pop_back();
    } else if (kind != '{' && modifier != '+' && opt_.lstrip_blocks) {
      lstrip_line(text, line_starting);
    }
    pending_text_ += text;
    if (kind == '#') return lex_comment();
    if (kind == '%' && try_raw_block()) return;
    flush_text();
    pos_ += 2 + ((modifier == '-' || modifier == '+') ? 1 : 0);
    tokens_.push_back({kind == '{' ? Token::Kind::var_begin : Token::Kind::block_begin, "", line_});
    lex_inside(kind == '{' ? '}' : '%');
  }

  size_t find_tag(size_t from) const {
    for (size_t i = from; i + 1 < src_.size(); ++i)
      if (src_[i] == '{' && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#'))
        return i;
    return src_.size();
  }

  // lstrip_blocks: drop spaces and tabs between the line start and a tag.
  static void lstrip_line(std::string& text, bool line_starting) {
    size_t nl = text.rfind('\n');
    size_t from = nl == std::string::npos ? 0 : nl + 1;
    if (nl == std::string::npos && !line_starting) return;
    for (size_t k = from; k < text.size(); ++k)
      if (!is_space(text[k])) return;
    text.erase(from);
  }

  void count_lines(size_t from, size_t to) {
    for (size_t i = from; i < to && i < src_.size(); ++i) line_ += src_[i] == '\n';
  }

  void flush_text() {
    if (!pending_text_.empty()) tokens_.push_back({Token::Kind::text, pending_text_, text_line_});
    pending_text_.clear();
    text_line_ = line_;
  }

  // After a block or comment closes: `-` strips all following whitespace,
  // trim_blocks drops one newline, `+` keeps everything.
  void after_block_end(char modifier) {
    if (modifier == '-') {
      strip_next_ = true;
    } else if (modifier != '+' && opt_.trim_blocks && pos_ < src_.size() && src_[pos_] == '\n') {
      ++pos_;
      ++line_;
    }
    if (pending_text_.empty()) text_line_ = line_;
  }

  void lex_comment() {
    size_t end = src_.find("#}", pos_ + 2);
    if (end == std::string_view::npos) fail(line_, "unterminated comment");
    char modifier = src_[end - 1];
    count_lines(pos_, end);
    pos_ = end + 2;
    after_block_end(modifier == '-' || modifier == '+' ? modifier : '\0');
  }

  // {% raw %}...{% endraw %}: the body is literal text.
  bool try_raw_block() {
    size_t p = pos_ + 2;
    if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) ++p;
    while (p < src_.size() && is_space(src_[p])) ++p;
    if (src_.substr(p, 3) != "raw") return false;
    p += 3;
    while (p < src_.size() && is_space(src_[p])) ++p;
    if (p < src_.size() && src_[p] == '-') ++p;
    if (src_.substr(p, 2) != "%}") return false;
    size_t body = p + 2;
    size_t end = body;
    for (;;) {
      end = src_.find("{%", end);
      if (end == std::string_view::npos) fail(line_, "unterminated raw block");
      size_t q = end + 2;
      bool strip = q < src_.size() && src_[q] == '-';
      if (strip || (q < src_.size() && src_[q] == '+')) ++q;
      while (q < src_.size() && is_space(src_[q])) ++q;
      if (src_.substr(q, 6) == "endraw") {
        q += 6;
        while (q < src_.size() && is_space(src_[q])) ++q;
        char modifier = src_[q] == '-' || src_[q] == '+' ? src_[q++] : '\0';
        if (src_.substr(q, 2) != "%}") fail(line_, "malformed endraw");
        std::string text(src_.substr(body, end - body));
        if (strip)
          while (!text.empty() && is_space(text.back())) text.pop_back();
        pending_text_ += text;
        count_lines(pos_, q + 2);
        pos_ = q + 2;
        after_block_end(modifier);
        return true;
      }
      end = q;
    }
  }

  void lex_inside(char closer) {
    int start_line = line_;
    for (;;) {
      while (pos_ < src_.size() && is_space(src_[pos_])) line_ += src_[pos_++] == '\n';
      if (pos_ >= src_.size()) fail(start_line, "unterminated tag");
      if (try_close(closer)) return;
      lex_token();
    }
  }

  bool try_close(char closer) {
    char c = src_[pos_];
    char modifier = '\0';
    size_t p = pos_;
    if ((c == '-' || c == '+') && p + 2 < src_.size() + 0 && src_[p + 1] == closer &&
        src_[p + 2] == '}') {
      modifier = c;
      ++p;
    }
    if (src_[p] != closer || p + 1 >= src_.size() || src_[p + 1] != '}') return false;
    // `}}` could close a dict literal inside `{{ {'a': {}} }}`; Jinja has the
    // same ambiguity and also ends the tag here.
    pos_ = p + 2;
    if (closer == '}') {
      tokens_.push_back({Token::Kind::var_end, "", line_});
      if (modifier == '-') strip_next_ = true;
    } else {
      tokens_.push_back({Token::Kind::block_end, "", line_});
      after_block_end(modifier);
    }
    text_line_ = line_;
    return true;
  }

  void lex_token() {
    char c = src_[pos_];
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') return lex_name();
    if (std::isdigit(static_cast<unsigned char>(c))) return lex_number();
    if (c == '\'' || c == '"') return lex_string(c);
    static const char* const kOps[] = {"**", "//", "==", "!=", "<=", ">=", "+", "-", "*",
                                       "/",  "%",  "~",  "<",  ">",  "|",  "(", ")", "[",
                                       "]",  "{",  "}",  ".",  ",",  ":",  "=", "!"};
    for (const char* op : kOps) {
      std::string_view sv(op);
      if (src_.substr(pos_, sv.size()) == sv) {
        tokens_.push_back({Token::Kind::op, std::string(sv), line_});
        pos_ += sv.size();
        return;
      }
    }
    fail(line_, std::string("unexpected character '") + c + "'");
  }

  void lex_name() {
    size_t start = pos_;
    while (pos_ < src_.size() &&
           (std::isalnum(static_cast<unsigned char>(src_[pos_])) || src_[pos_] == '_'))
      ++pos_;
    tokens_.push_back({Token::Kind::name, std::string(src_.substr(start, pos_ - start)), line_});
  }

  void lex_number() {
    size_t start = pos_;
    bool is_float = false;
    auto digits = [&] {
      while (pos_ < src_.size() &&
             (std::isdigit(static_cast<unsigned char>(src_[pos_])) || src_[pos_] == '_'))
        ++pos_;
    };
    digits();
    if (pos_ + 1 < src_.size() && src_[pos_] == '.' &&
        std::isdigit(static_cast<unsigned char>(src_[pos_ + 1]))) {
      is_float = true;
      ++pos_;
      digits();
    }
    if (pos_ < src_.size() && (src_[pos_] == 'e' || src_[pos_] == 'E')) {
      size_t p = pos_ + 1;
      if (p < src_.size() && (src_[p] == '+' || src_[p] == '-')) ++p;
      if (p < src_.size() && std::isdigit(static_cast<unsigned char>(src_[p]))) {
        is_float = true;
        pos_ = p;
        digits();
      }
    }
    std::string text;
    for (char ch : src_.substr(start, pos_ - start))
      if (ch != '_') text += ch;
    tokens_.push_back({is_float ? Token::Kind::floating : Token::Kind::integer, text, line_});
  }

  void lex_string(char quote) {
    int start_line = line_;
    std::string out;
    ++pos_;
    for (;;) {
      if (pos_ >= src_.size()) fail(start_line, "unterminated string");
      char c = src_[pos_++];
      if (c == quote) break;
      if (c == '\n') ++line_;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= src_.size()) fail(start_line, "unterminated string");
      lex_escape(out);
    }
    tokens_.push_back({Token::Kind::string, out, start_line});
  }

  // Python escapes, as Jinja decodes string literals.
  void lex_escape(std::string& out) {
    char e = src_[pos_++];
    switch (e) {
      case 'n':
        out += '\n';
        return;
      case 't':
        out += '\t';
        return;
      case 'r':
        out += '\r';
        return;
      case '0':
        out += '\0';
        return;
      case 'a':
        out += '\a';
        return;
      case 'b':
        out += '\b';
        return;
      case 'f':
        out += '\f';
        return;
      case 'v':
        out += '\v';
        return;
      case '\\':
        out += '\\';
        return;
      case '\'':
        out += '\'';
        return;
      case '"':
        out += '"';
        return;
      case '\n':
        ++line_;
        return;
      case 'x':
        return append_utf8(out, read_hex(2));
      case 'u':
        return append_utf8(out, read_hex(4));
      case 'U':
        return append_utf8(out, read_hex(8));
      default:
        out += '\\';
        out += e;
        return;
    }
  }

  uint32_t read_hex(int n) {
    uint32_t v = 0;
    for (int i = 0; i < n; ++i) {
      if (pos_ >= src_.size() || !std::isxdigit(static_cast<unsigned char>(src_[pos_])))
        fail(line_, "bad escape in string literal");
      char h = src_[pos_++];
      v = v * 16 +
          (std::isdigit(static_cast<unsigned char>(h)) ? h - '0' : (std::tolower(h) - 'a' + 10));
    }
    return v;
  }

  std::string_view src_;
  LexOptions opt_;
  size_t pos_ = 0;
  int line_ = 1;
  int text_line_ = 1;
  bool strip_next_ = false;
  std::string pending_text_;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> lex_template(std::string_view source, const LexOptions& options) {
  // Jinja drops one trailing newline of the source (keep_trailing_newline
  // is off in Hugging Face's environment).
  if (!source.empty() && source.back() == '\n') {
    source.remove_suffix(1);
    if (!source.empty() && source.back() == '\r') source.remove_suffix(1);
  }
  return Lexer(source, options).run();
}

}  // namespace cortiq::jinja
