// Parsing one GGUF file (one part of a split model) held in memory. The
// result holds views into `bytes` for tensor data; GgufFile owns the bytes
// and joins the parts.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "formats/gguf/gguf_file.hpp"

namespace cortiq::gguf {

// Limits on the structure itself, beyond what the file size implies.
inline constexpr int kMaxArrayNesting = 16;                   // arrays of arrays, deeper is refused
inline constexpr uint64_t kMaxAlignment = uint64_t{1} << 31;  // largest u32 power of two

struct ParsedPart {
  uint32_t version = 0;
  uint64_t alignment = kDefaultAlignment;
  uint64_t data_offset = 0;  // where the (aligned) data section starts
  std::vector<KeyValue> metadata;
  std::vector<TensorInfo> tensors;  // split = 0, data = views into the bytes
};

// Throws FormatError naming `file`, the field and the offset on any defect.
ParsedPart parse_part(std::span<const std::byte> bytes, std::string_view file);

// A key or tensor name from an untrusted file, made safe to print in an
// error message: control bytes escaped, long names shortened.
std::string printable_name(std::string_view name);

}  // namespace cortiq::gguf
