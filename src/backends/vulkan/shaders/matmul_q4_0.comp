#version 450
// matmul with Q4_0 weights: x = d * (q - 8), fp16 d then 16 bytes of
// nibbles (low nibbles: elements 0..15, high: 16..31).
#define BLOCK_ELEMS 32u
#define BLOCK_BYTES 18u
#include "matmul.glsl"

void decode_block(uint offset, out float w[BLOCK_ELEMS]) {
  const float d = load_f16(offset);
  for (uint k = 0u; k < 4u; ++k) {
    const uint q = load_u32(offset + 2u + 4u * k);
    for (uint b = 0u; b < 4u; ++b) {
      const uint byte_value = (q >> (8u * b)) & 0xFFu;
      w[4u * k + b] = float(int(byte_value & 0xFu) - 8) * d;
      w[4u * k + b + 16u] = float(int(byte_value >> 4u) - 8) * d;
    }
  }
}
