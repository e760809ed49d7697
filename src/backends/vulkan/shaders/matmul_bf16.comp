#version 450
// matmul with BF16 weights: one element per step, the top half of an f32.
#define BLOCK_ELEMS 1u
#define BLOCK_BYTES 2u
#include "matmul.glsl"

void decode_block(uint offset, out float w[BLOCK_ELEMS]) {
  w[0] = uintBitsToFloat(load_u16(offset) << 16u);
}
