#version 450
// matmul with F32 weights: one element per step.
#define BLOCK_ELEMS 1u
#define BLOCK_BYTES 4u
#include "matmul.glsl"

void decode_block(uint offset, out float w[BLOCK_ELEMS]) {
  w[0] = uintBitsToFloat(weight_words[offset >> 2u]);
}
