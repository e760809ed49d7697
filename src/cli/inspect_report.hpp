// What `cortiq inspect` prints about a GGUF file, as text for people or as
// JSON for scripts. Long arrays are abridged to their first items plus the
// count, long strings to their first bytes plus the length, unless `full`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "formats/gguf/gguf_file.hpp"

namespace cortiq::cli {

struct InspectOptions {
  size_t max_items = 8;          // array items shown
  size_t max_string_bytes = 80;  // string bytes shown
  bool full = false;             // show every item and byte (JSON only)
};

struct TypeTotal {
  GgmlType type;
  size_t count = 0;
  uint64_t bytes = 0;
};

// Tensor count and bytes per weight type, ordered by type id.
std::vector<TypeTotal> type_totals(const gguf::GgufFile& file);
uint64_t parameter_count(const gguf::GgufFile& file);

std::string inspect_text(const gguf::GgufFile& file, const InspectOptions& options);
std::string inspect_json(const gguf::GgufFile& file, const InspectOptions& options);

}  // namespace cortiq::cli
