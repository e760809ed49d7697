// Argument checks shared by dequantize_row and quantize_row: a supported
// type, a whole number of blocks, and a byte span of exactly the right size.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "base/error.hpp"
#include "quant/ggml_type.hpp"

namespace cortiq::quant {

// `operation` names the caller in the message, e.g. "quantize_row".
// The message is built only on failure: the check runs for every weight row
// of every forward pass, which must not allocate.
inline void check_row(std::string_view operation, GgmlType type, bool supported, size_t n_elements,
                      size_t n_bytes) {
  if (supported) {
    const auto expected = ggml_row_bytes(type, n_elements);
    if (expected && *expected == n_bytes) return;
  }
  const std::string prefix = std::string(operation) + ": ";
  if (!supported) {
    throw Error(prefix + "unsupported type " + std::string(ggml_type_name(type)));
  }
  const GgmlTypeTraits& traits = ggml_type_traits(type);
  const auto expected = ggml_row_bytes(type, n_elements);
  if (!expected) {
    throw Error(prefix + std::string(traits.name) + " row of " + std::to_string(n_elements) +
                " elements is not a whole number of " + std::to_string(traits.block_elems) +
                "-element blocks");
  }
  if (*expected != n_bytes) {
    throw Error(prefix + std::string(traits.name) + " row of " + std::to_string(n_elements) +
                " elements takes " + std::to_string(*expected) + " bytes, got " +
                std::to_string(n_bytes));
  }
}

}  // namespace cortiq::quant
