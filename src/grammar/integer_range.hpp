// A GBNF expression for the decimal integers of a range, as JSON writes
// them (no leading zeros, no "+", no "-0"): what JSON Schema's minimum and
// maximum become in a grammar.
//
//   integer_range_gbnf(10, 255)  // [1-9] [0-9] | "1" [0-9] [0-9] | "2" [0-4] [0-9] | "25" [0-5]
//
// Bounds are clamped to ±kIntegerRangeLimit (18 digits, so every value
// fits an int64): a side without a bound stops there.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace cortiq::grammar {

inline constexpr int64_t kIntegerRangeLimit = 999'999'999'999'999'999;

// Requires lo <= hi where both are given. The expression is a
// parenthesized group of alternatives, disjoint so that each number has
// one reading.
std::string integer_range_gbnf(std::optional<int64_t> lo, std::optional<int64_t> hi);

}  // namespace cortiq::grammar
