#include "grammar/integer_range.hpp"

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "grammar/gbnf_text.hpp"

namespace cortiq::grammar {

namespace {

bool all_of_digit(std::string_view s, char digit) {
  return std::all_of(s.begin(), s.end(), [digit](char c) { return c == digit; });
}

std::string digit_class(char first, char last) {
  if (first == last) return std::string("\"") + first + "\"";
  if (first == '0' && last == '9') return "[0-9]";
  return std::string("[") + first + "-" + last + "]";
}

// n digits, any of them.
std::string any_digits(size_t n) {
  if (n == 0) return "";
  if (n == 1) return "[0-9]";
  return "[0-9]{" + std::to_string(n) + "}";
}

std::string quoted(std::string_view digits) {
  std::string out = "\"";
  out.append(digits).append("\"");
  return out;
}

std::string parenthesized(const std::vector<std::string>& alternatives) {
  std::string out = "(";
  out.append(join_nonempty(alternatives, " | ")).append(")");
  return out;
}

// The digit strings of one length from lo to hi (lo <= hi, same length),
// as alternatives: split at the first digit where they differ, so the low
// end, the digits between and the high end each read one way.
std::vector<std::string> same_length_range(std::string_view lo, std::string_view hi) {
  if (lo.empty()) return {""};
  if (lo == hi) return {quoted(lo)};
  if (lo[0] == hi[0]) {
    std::vector<std::string> rest = same_length_range(lo.substr(1), hi.substr(1));
    const std::string head = std::string("\"") + lo[0] + "\"";
    if (rest.size() == 1) return {join_nonempty({head, rest[0]}, " ")};
    return {head + " (" + join_nonempty(rest, " | ") + ")"};
  }
  const std::string_view lo_rest = lo.substr(1);
  const std::string_view hi_rest = hi.substr(1);
  // The low and high ends join the middle when they cover all their tails.
  const bool lo_whole = all_of_digit(lo_rest, '0');
  const bool hi_whole = all_of_digit(hi_rest, '9');
  const char middle_first = static_cast<char>(lo_whole ? lo[0] : lo[0] + 1);
  const char middle_last = static_cast<char>(hi_whole ? hi[0] : hi[0] - 1);
  std::vector<std::string> alternatives;
  auto branch = [&](char digit, std::string_view from, std::string_view to) {
    std::vector<std::string> rest = same_length_range(from, to);
    const std::string tail = rest.size() == 1 ? rest[0] : parenthesized(rest);
    alternatives.push_back(join_nonempty({digit_class(digit, digit), tail}, " "));
  };
  if (!lo_whole) branch(lo[0], lo_rest, std::string(lo_rest.size(), '9'));
  if (middle_first <= middle_last) {
    alternatives.push_back(
        join_nonempty({digit_class(middle_first, middle_last), any_digits(lo_rest.size())}, " "));
  }
  if (!hi_whole) branch(hi[0], std::string(hi_rest.size(), '0'), hi_rest);
  return alternatives;
}

int64_t power_of_ten(size_t n) {
  int64_t p = 1;
  while (n-- > 0) p *= 10;
  return p;
}

// The numbers lo..hi, 0 <= lo <= hi, each length of digits in turn.
std::vector<std::string> non_negative_range(int64_t lo, int64_t hi) {
  std::vector<std::string> alternatives;
  const size_t lo_digits = std::to_string(lo).size();
  const size_t hi_digits = std::to_string(hi).size();
  for (size_t digits = lo_digits; digits <= hi_digits; ++digits) {
    const int64_t first = std::max(lo, digits == 1 ? 0 : power_of_ten(digits - 1));
    const int64_t last = std::min(hi, power_of_ten(digits) - 1);
    for (std::string& a : same_length_range(std::to_string(first), std::to_string(last))) {
      alternatives.push_back(std::move(a));
    }
  }
  return alternatives;
}

}  // namespace

std::string integer_range_gbnf(std::optional<int64_t> lo_bound, std::optional<int64_t> hi_bound) {
  const int64_t lo =
      std::clamp(lo_bound.value_or(-kIntegerRangeLimit), -kIntegerRangeLimit, kIntegerRangeLimit);
  const int64_t hi =
      std::clamp(hi_bound.value_or(kIntegerRangeLimit), -kIntegerRangeLimit, kIntegerRangeLimit);
  if (lo > hi) throw std::invalid_argument("integer_range_gbnf: empty range");
  std::vector<std::string> alternatives;
  if (lo < 0) {
    // -hi' .. -lo': the magnitudes, behind a minus sign ("-0" is not written).
    const std::vector<std::string> magnitudes = non_negative_range(std::max<int64_t>(1, -hi), -lo);
    alternatives.push_back("\"-\" (" + join_nonempty(magnitudes, " | ") + ")");
  }
  if (hi >= 0) {
    for (std::string& a : non_negative_range(std::max<int64_t>(0, lo), hi)) {
      alternatives.push_back(std::move(a));
    }
  }
  return parenthesized(alternatives);
}

}  // namespace cortiq::grammar
