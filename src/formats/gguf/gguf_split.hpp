// File names of split models, as the peer's gguf-split writes them:
// NAME-00001-of-00003.gguf, NAME-00002-of-00003.gguf, ... with the keys
// split.no (0-based), split.count and split.tensors.count in every part.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace cortiq::gguf {

inline constexpr std::string_view kSplitNoKey = "split.no";
inline constexpr std::string_view kSplitCountKey = "split.count";
inline constexpr std::string_view kSplitTensorsCountKey = "split.tensors.count";

struct SplitPath {
  std::string prefix;   // everything before "-00001-of-00003.gguf"
  uint32_t number = 0;  // 1-based, as in the file name
  uint32_t count = 0;
};

// "PREFIX-%05u-of-%05u.gguf" for a 1-based part number.
std::string split_path(std::string_view prefix, uint32_t number, uint32_t count);
// The parts of a split file name; nullopt when the name does not follow it.
std::optional<SplitPath> parse_split_path(std::string_view path);

}  // namespace cortiq::gguf
