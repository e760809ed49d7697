// Reference (de)quantization, row by row, for every weight type the engine
// supports. Dequantization is bit-exact with the peer (llama.cpp); the
// quantizers of Q4_0..Q8_0 and Q2_K..Q6_K write the same bytes as the peer's
// reference quantizers (no importance matrix). Checked by committed goldens.
#pragma once

#include <cstddef>
#include <span>

#include "quant/ggml_type.hpp"

namespace cortiq {

// Decodes dst.size() elements (a whole number of blocks) from src, which
// must hold exactly ggml_row_bytes(type, dst.size()) bytes. Throws
// cortiq::Error for a type outside can_dequantize() or a size mismatch.
void dequantize_row(GgmlType type, std::span<const std::byte> src, std::span<float> dst);

// Encodes src (a whole number of blocks) into dst, which must hold exactly
// ggml_row_bytes(type, src.size()) bytes. Throws cortiq::Error for a type
// outside can_quantize() or a size mismatch.
void quantize_row(GgmlType type, std::span<const float> src, std::span<std::byte> dst);

}  // namespace cortiq
