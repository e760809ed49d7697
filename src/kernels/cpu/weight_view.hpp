// A borrowed view of one weight matrix as the file stores it: n_rows rows
// (output features) of n_cols elements (input features) in any weight type,
// each row row_bytes long, contiguous. The bytes usually live in the mapped
// model file; the view never owns them. `packed`, when set, is the same
// matrix rearranged for the integer kernels (packed_weights.hpp), owned by
// the model; `data` stays valid beside it (embedding lookups read rows).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "quant/ggml_type.hpp"

namespace cortiq::kernels {

struct WeightView {
  GgmlType type = GgmlType::F32;
  int64_t n_rows = 0;  // ggml ne[1]: output features
  int64_t n_cols = 0;  // ggml ne[0]: input features, the row length
  size_t row_bytes = 0;
  const std::byte* data = nullptr;    // n_rows * row_bytes bytes
  std::string_view name;              // the tensor name, for error messages
  const std::byte* packed = nullptr;  // packed_layout(type, n_rows) copy, or null

  std::span<const std::byte> row(int64_t r) const {
    return {data + static_cast<size_t>(r) * row_bytes, row_bytes};
  }
  bool empty() const { return data == nullptr; }
};

}  // namespace cortiq::kernels
