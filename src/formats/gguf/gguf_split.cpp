#include "formats/gguf/gguf_split.hpp"

#include "base/strings.hpp"

namespace cortiq::gguf {

namespace {

// Parses the run of decimal digits that ends just before `end`; returns
// where it starts, or npos when there are none or the value passes 2^32.
size_t parse_digits_before(std::string_view s, size_t end, uint32_t& value) {
  size_t begin = end;
  while (begin > 0 && s[begin - 1] >= '0' && s[begin - 1] <= '9') --begin;
  if (begin == end || end - begin > 9) return std::string_view::npos;
  value = 0;
  for (size_t i = begin; i < end; ++i) value = value * 10 + static_cast<uint32_t>(s[i] - '0');
  return begin;
}

}  // namespace

std::string split_path(std::string_view prefix, uint32_t number, uint32_t count) {
  return std::string(prefix) + strfmt("-%05u-of-%05u.gguf", number, count);
}

std::optional<SplitPath> parse_split_path(std::string_view path) {
  constexpr std::string_view kSuffix = ".gguf";
  constexpr std::string_view kOf = "-of-";
  if (!ends_with(path, kSuffix)) return std::nullopt;
  SplitPath split;
  const size_t count_begin = parse_digits_before(path, path.size() - kSuffix.size(), split.count);
  if (count_begin == std::string_view::npos || count_begin < kOf.size() ||
      path.substr(count_begin - kOf.size(), kOf.size()) != kOf) {
    return std::nullopt;
  }
  const size_t number_begin = parse_digits_before(path, count_begin - kOf.size(), split.number);
  if (number_begin == std::string_view::npos || number_begin == 0 ||
      path[number_begin - 1] != '-') {
    return std::nullopt;
  }
  split.prefix = std::string(path.substr(0, number_begin - 1));
  // Only names that the peer's own format reproduces count as split names.
  if (split_path(split.prefix, split.number, split.count) != path) return std::nullopt;
  return split;
}

}  // namespace cortiq::gguf
