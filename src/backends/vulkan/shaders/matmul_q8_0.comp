#version 450
// matmul with Q8_0 weights: x = d * q, fp16 d then 32 signed bytes.
#define BLOCK_ELEMS 32u
#define BLOCK_BYTES 34u
#include "matmul.glsl"

void decode_block(uint offset, out float w[BLOCK_ELEMS]) {
  const float d = load_f16(offset);
  for (uint k = 0u; k < 8u; ++k) {
    const int q = int(load_u32(offset + 2u + 4u * k));
    for (uint b = 0u; b < 4u; ++b) {
      w[4u * k + b] = float(bitfieldExtract(q, int(8u * b), 8)) * d;  // sign-extended
    }
  }
}
