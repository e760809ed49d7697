#version 450
// matmul with Q4_1 weights: x = d * q + m, fp16 d and m then 16 bytes of
// nibbles. `precise`: the product and the sum are rounded separately, as the
// reference decoder does.
#define BLOCK_ELEMS 32u
#define BLOCK_BYTES 20u
#include "matmul.glsl"

void decode_block(uint offset, out float w[BLOCK_ELEMS]) {
  const float d = load_f16(offset);
  const float m = load_f16(offset + 2u);
  for (uint k = 0u; k < 4u; ++k) {
    const uint q = load_u32(offset + 4u + 4u * k);
    for (uint b = 0u; b < 4u; ++b) {
      const uint byte_value = (q >> (8u * b)) & 0xFFu;
      precise float low = float(byte_value & 0xFu) * d + m;
      precise float high = float(byte_value >> 4u) * d + m;
      w[4u * k + b] = low;
      w[4u * k + b + 16u] = high;
    }
  }
}
