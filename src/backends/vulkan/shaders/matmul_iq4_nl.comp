#version 450
// matmul with IQ4_NL weights: x = d * kIq4nlValues[q], an fp16 d then 16
// bytes of nibbles (low nibbles the first 16 elements, high the next 16).
#define BLOCK_ELEMS 32u
#define BLOCK_BYTES 18u
#include "matmul.glsl"
#include "k_quant_bytes.glsl"
#include "iq4_values.glsl"

void decode_block(uint offset, out float w[BLOCK_ELEMS]) {
  const float d = load_f16(offset);
  for (uint j = 0u; j < 16u; ++j) {
    const uint b = byte_at(offset + 2u + j);
    precise float low = d * kIq4nlValues[b & 0xFu];
    precise float high = d * kIq4nlValues[b >> 4u];
    w[j] = low;
    w[j + 16u] = high;
  }
}
