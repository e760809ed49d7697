// Dequantizing weight rows on the hot path (matmul, embedding lookup) with
// the best SIMD variant for the type: bit-identical to the reference
// quant::dequantize_row, which it falls back to for the types without one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "quant/ggml_type.hpp"

namespace cortiq::kernels {

// Same contract as dequantize_row (src holds exactly the row's bytes).
void dequantize_row_fast(GgmlType type, std::span<const std::byte> src, std::span<float> dst);

namespace avx2 {
// n a whole number of blocks; false for a type it has no kernel for.
bool dequantize_row(GgmlType type, const std::byte* src, float* dst, int64_t n);
}  // namespace avx2

}  // namespace cortiq::kernels
