#include "base/json_writer.hpp"

#include <charconv>
#include <cmath>
#include <stdexcept>

namespace cortiq {

namespace {

// Length of the valid UTF-8 sequence starting at text[i], or 0 when the
// bytes there are not one (bad lead byte, truncated, overlong, surrogate,
// beyond U+10FFFF).
size_t valid_utf8_length(std::string_view text, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<uint8_t>(text[k]); };
  const uint8_t lead = byte(i);
  if (lead < 0x80) return 1;
  size_t length = 0;
  uint32_t code = 0;
  if ((lead & 0xE0) == 0xC0) {
    length = 2;
    code = lead & 0x1F;
  } else if ((lead & 0xF0) == 0xE0) {
    length = 3;
    code = lead & 0x0F;
  } else if ((lead & 0xF8) == 0xF0) {
    length = 4;
    code = lead & 0x07;
  } else {
    return 0;
  }
  if (i + length > text.size()) return 0;
  for (size_t k = 1; k < length; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
    code = (code << 6) | (byte(i + k) & 0x3F);
  }
  static constexpr uint32_t kMinCode[] = {0, 0, 0x80, 0x800, 0x10000};
  if (code < kMinCode[length]) return 0;           // overlong
  if (code >= 0xD800 && code <= 0xDFFF) return 0;  // surrogate
  if (code > 0x10FFFF) return 0;
  return length;
}

void append_escaped_ascii(std::string& out, char c) {
  switch (c) {
    case '"':
      out += "\\\"";
      return;
    case '\\':
      out += "\\\\";
      return;
    case '\b':
      out += "\\b";
      return;
    case '\f':
      out += "\\f";
      return;
    case '\n':
      out += "\\n";
      return;
    case '\r':
      out += "\\r";
      return;
    case '\t':
      out += "\\t";
      return;
    default:
      break;
  }
  if (static_cast<uint8_t>(c) < 0x20 || c == 0x7F) {
    static constexpr char kHex[] = "0123456789abcdef";
    out += "\\u00";
    out += kHex[(static_cast<uint8_t>(c) >> 4) & 0xF];
    out += kHex[static_cast<uint8_t>(c) & 0xF];
    return;
  }
  out += c;
}

template <class Number>
std::string shortest_text(Number x) {
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof(buffer), x);
  return std::string(buffer, result.ptr);
}

}  // namespace

std::string JsonWriter::quote(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 2);
  out += '"';
  for (size_t i = 0; i < text.size();) {
    const size_t length = valid_utf8_length(text, i);
    if (length == 0) {
      out += "\xEF\xBF\xBD";  // U+FFFD REPLACEMENT CHARACTER
      ++i;
    } else if (length == 1) {
      append_escaped_ascii(out, text[i]);
      ++i;
    } else {
      out.append(text.substr(i, length));
      i += length;
    }
  }
  out += '"';
  return out;
}

void JsonWriter::newline_and_indent(size_t depth) {
  if (indent_ <= 0) return;
  out_ += '\n';
  out_.append(depth * static_cast<size_t>(indent_), ' ');
}

void JsonWriter::before_value() {
  if (stack_.empty()) {
    if (has_root_) throw std::logic_error("JsonWriter: a second top-level value");
    has_root_ = true;
    return;
  }
  Frame& frame = stack_.back();
  if (frame.scope == Scope::object) {
    if (!frame.key_pending) throw std::logic_error("JsonWriter: value without a key in an object");
    frame.key_pending = false;
    return;
  }
  if (!frame.empty) out_ += ',';
  frame.empty = false;
  newline_and_indent(stack_.size());
}

JsonWriter& JsonWriter::key(std::string_view name) {
  if (stack_.empty() || stack_.back().scope != Scope::object || stack_.back().key_pending) {
    throw std::logic_error("JsonWriter: key outside an object or twice in a row");
  }
  Frame& frame = stack_.back();
  if (!frame.empty) out_ += ',';
  frame.empty = false;
  frame.key_pending = true;
  newline_and_indent(stack_.size());
  out_ += quote(name);
  out_ += indent_ > 0 ? ": " : ":";
  return *this;
}

JsonWriter& JsonWriter::begin_object() {
  before_value();
  out_ += '{';
  stack_.push_back({Scope::object});
  return *this;
}

JsonWriter& JsonWriter::begin_array() {
  before_value();
  out_ += '[';
  stack_.push_back({Scope::array});
  return *this;
}

JsonWriter& JsonWriter::close(Scope scope) {
  if (stack_.empty() || stack_.back().scope != scope || stack_.back().key_pending) {
    throw std::logic_error("JsonWriter: unbalanced end of object or array");
  }
  const bool was_empty = stack_.back().empty;
  stack_.pop_back();
  if (!was_empty) newline_and_indent(stack_.size());
  out_ += scope == Scope::object ? '}' : ']';
  return *this;
}

JsonWriter& JsonWriter::end_object() {
  return close(Scope::object);
}
JsonWriter& JsonWriter::end_array() {
  return close(Scope::array);
}

JsonWriter& JsonWriter::value(std::string_view text) {
  before_value();
  out_ += quote(text);
  return *this;
}

JsonWriter& JsonWriter::value(bool b) {
  before_value();
  out_ += b ? "true" : "false";
  return *this;
}

JsonWriter& JsonWriter::value(int64_t n) {
  before_value();
  out_ += std::to_string(n);
  return *this;
}

JsonWriter& JsonWriter::value(uint64_t n) {
  before_value();
  out_ += std::to_string(n);
  return *this;
}

JsonWriter& JsonWriter::value(double x) {
  if (!std::isfinite(x)) return null();
  before_value();
  out_ += shortest_text(x);
  return *this;
}

JsonWriter& JsonWriter::value(float x) {
  if (!std::isfinite(x)) return null();
  before_value();
  out_ += shortest_text(x);
  return *this;
}

JsonWriter& JsonWriter::null() {
  before_value();
  out_ += "null";
  return *this;
}

}  // namespace cortiq
