#version 450
// matmul with Q5_1 weights: x = d * q + m, fp16 d and m, 32 fifth bits,
// then 16 bytes of low nibbles. `precise`: two roundings, as the reference.
#define BLOCK_ELEMS 32u
#define BLOCK_BYTES 24u
#include "matmul.glsl"

void decode_block(uint offset, out float w[BLOCK_ELEMS]) {
  const float d = load_f16(offset);
  const float m = load_f16(offset + 2u);
  const uint high = load_u32(offset + 4u);
  for (uint k = 0u; k < 4u; ++k) {
    const uint q = load_u32(offset + 8u + 4u * k);
    for (uint b = 0u; b < 4u; ++b) {
      const uint j = 4u * k + b;
      const uint byte_value = (q >> (8u * b)) & 0xFFu;
      const uint q0 = (byte_value & 0xFu) | (((high >> j) & 1u) << 4u);
      const uint q1 = (byte_value >> 4u) | (((high >> (j + 16u)) & 1u) << 4u);
      precise float low = float(q0) * d + m;
      precise float top = float(q1) * d + m;
      w[j] = low;
      w[j + 16u] = top;
    }
  }
}
