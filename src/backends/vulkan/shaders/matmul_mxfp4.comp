#version 450
// matmul with MXFP4 weights (src/quant/dequantize.cpp's decode): an E8M0
// exponent byte, then 16 bytes of E2M1 nibbles (low nibbles the first 16
// elements); x = kMxfp4Values[q] * 2^(e - 128) (quant/scalar_math.hpp's
// e8m0_to_fp32_half: the values table is doubled, so the exponent is
// halved). Blocks are 17 bytes and sit at any byte offset: only byte reads.
#define BLOCK_ELEMS 32u
#define BLOCK_BYTES 17u
#include "matmul.glsl"
#include "k_quant_bytes.glsl"

const float kMxfp4Values[16] =
    float[16](0.0, 1.0, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 0.0, -1.0, -2.0, -3.0, -4.0, -6.0, -8.0, -12.0);

float e8m0_half(uint e) {
  return uintBitsToFloat(e < 2u ? (0x00200000u << e) : ((e - 1u) << 23u));
}

void decode_block(uint offset, out float w[BLOCK_ELEMS]) {
  const float d = e8m0_half(byte_at(offset));
  for (uint j = 0u; j < 16u; ++j) {
    const uint b = byte_at(offset + 1u + j);
    precise float low = kMxfp4Values[b & 0xFu] * d;
    precise float high = kMxfp4Values[b >> 4u] * d;
    w[j] = low;
    w[j + 16u] = high;
  }
}
