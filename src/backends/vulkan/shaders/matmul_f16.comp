#version 450
// matmul with F16 weights: one element per step.
#define BLOCK_ELEMS 1u
#define BLOCK_BYTES 2u
#include "matmul.glsl"

void decode_block(uint offset, out float w[BLOCK_ELEMS]) { w[0] = load_f16(offset); }
