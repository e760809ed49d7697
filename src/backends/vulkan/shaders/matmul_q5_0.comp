#version 450
// matmul with Q5_0 weights: x = d * (q - 16), fp16 d, 32 fifth bits (bit j
// for element j), then 16 bytes of low nibbles.
#define BLOCK_ELEMS 32u
#define BLOCK_BYTES 22u
#include "matmul.glsl"

void decode_block(uint offset, out float w[BLOCK_ELEMS]) {
  const float d = load_f16(offset);
  const uint high = load_u32(offset + 2u);
  for (uint k = 0u; k < 4u; ++k) {
    const uint q = load_u32(offset + 6u + 4u * k);
    for (uint b = 0u; b < 4u; ++b) {
      const uint j = 4u * k + b;
      const uint byte_value = (q >> (8u * b)) & 0xFFu;
      const uint q0 = (byte_value & 0xFu) | (((high >> j) & 1u) << 4u);
      const uint q1 = (byte_value >> 4u) | (((high >> (j + 16u)) & 1u) << 4u);
      w[j] = float(int(q0) - 16) * d;
      w[j + 16u] = float(int(q1) - 16) * d;
    }
  }
}
