// Small string helpers (g++ 12 has no <format>).
#pragma once

#include <cstdarg>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace cortiq {

// printf-style formatting into a std::string.
std::string strfmt(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string vstrfmt(const char* fmt, va_list args);

// "1.50 MiB", "812 B": byte counts for people.
std::string human_bytes(uint64_t n);

// Thousands separators: 1234567 -> "1,234,567".
std::string with_commas(uint64_t n);

std::vector<std::string_view> split(std::string_view s, char sep);
bool starts_with(std::string_view s, std::string_view prefix);
bool ends_with(std::string_view s, std::string_view suffix);

// Parses a whole decimal integer; false on junk, overflow or empty input.
bool parse_int64(std::string_view s, int64_t& out);
bool parse_double(std::string_view s, double& out);

// A token's bytes shown between quotes on one line: newlines, tabs, quotes,
// backslashes, control bytes and bytes that are not valid UTF-8 escaped.
std::string escape_piece(std::string_view piece);

}  // namespace cortiq
