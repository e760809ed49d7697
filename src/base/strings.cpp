#include "base/strings.hpp"

#include <charconv>
#include <cstdio>
#include <cstdlib>

namespace cortiq {

std::string vstrfmt(const char* fmt, va_list args) {
  va_list copy;
  va_copy(copy, args);
  const int n = std::vsnprintf(nullptr, 0, fmt, copy);
  va_end(copy);
  if (n <= 0) return {};
  std::string out(static_cast<size_t>(n), '\0');
  std::vsnprintf(out.data(), out.size() + 1, fmt, args);
  return out;
}

std::string strfmt(const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  std::string out = vstrfmt(fmt, args);
  va_end(args);
  return out;
}

std::string human_bytes(uint64_t n) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  if (n < 1024) return strfmt("%llu B", static_cast<unsigned long long>(n));
  double v = static_cast<double>(n);
  int unit = 0;
  while (v >= 1024.0 && unit < 5) {
    v /= 1024.0;
    ++unit;
  }
  return strfmt("%.2f %s", v, kUnits[unit]);
}

std::string with_commas(uint64_t n) {
  std::string digits = std::to_string(n);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    // A separator wherever a whole number of digit triples remains.
    if (i != 0 && (digits.size() - i) % 3 == 0) out.push_back(',');
    out.push_back(digits[i]);
  }
  return out;
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  for (;;) {
    const size_t pos = s.find(sep, start);
    if (pos == std::string_view::npos) {
      parts.push_back(s.substr(start));
      return parts;
    }
    parts.push_back(s.substr(start, pos - start));
    start = pos + 1;
  }
}

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.starts_with(prefix);
}
bool ends_with(std::string_view s, std::string_view suffix) {
  return s.ends_with(suffix);
}

bool parse_int64(std::string_view s, int64_t& out) {
  if (s.empty()) return false;
  const char* first = s.data();
  if (*first == '+') ++first;
  const auto [ptr, ec] = std::from_chars(first, s.data() + s.size(), out);
  return ec == std::errc() && ptr == s.data() + s.size();
}

bool parse_double(std::string_view s, double& out) {
  if (s.empty()) return false;
  std::string copy(s);  // strtod needs a terminator
  char* end = nullptr;
  out = std::strtod(copy.c_str(), &end);
  return end == copy.c_str() + copy.size();
}

// (strings.hpp) A piece shown between quotes on one line: control bytes, quotes,
// backslashes and bytes that are not valid UTF-8 are escaped.
std::string escape_piece(std::string_view piece) {
  std::string out;
  for (size_t i = 0; i < piece.size(); ++i) {
    const auto c = static_cast<unsigned char>(piece[i]);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\\' || c == '\'') {
      out += '\\', out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7f) {
      out += strfmt("\\x%02x", c);
    } else if (c < 0x80) {
      out += static_cast<char>(c);
    } else {
      // Copy a whole well-formed sequence; escape a byte that starts none.
      const size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 ? 2 : 0;
      bool ok = len != 0 && i + len <= piece.size() && c <= 0xF4;
      for (size_t k = 1; ok && k < len; ++k) ok = (piece[i + k] & 0xC0) == 0x80;
      if (ok) {
        out.append(piece.substr(i, len));
        i += len - 1;
      } else {
        out += strfmt("\\x%02x", c);
      }
    }
  }
  return out;
}

}  // namespace cortiq
