#version 450
// matmul with Q4_K weights (src/quant/dequantize.cpp's decode): a 256-element
// super-block of fp16 d and dmin, 12 bytes of packed 6-bit scales and mins
// for its eight groups of 32, then 128 bytes of nibbles; x = d * scale * q -
// dmin * min. `precise`: the product and the difference are rounded
// separately, as the reference decoder does.
#define BLOCK_ELEMS 256u
#define BLOCK_BYTES 144u
#include "matmul.glsl"
#include "k_quant_bytes.glsl"

void decode_block(uint offset, out float w[BLOCK_ELEMS]) {
  const float d = load_f16(offset);
  const float dmin = load_f16(offset + 2u);
  const uint scales = offset + 4u, qs = offset + 16u;
  for (uint group = 0u; group < 8u; ++group) {
    uint scale, min_q;
    if (group < 4u) {
      scale = byte_at(scales + group) & 63u;
      min_q = byte_at(scales + group + 4u) & 63u;
    } else {
      scale = (byte_at(scales + group + 4u) & 0xFu) | ((byte_at(scales + group - 4u) >> 6u) << 4u);
      min_q = (byte_at(scales + group + 4u) >> 4u) | ((byte_at(scales + group) >> 6u) << 4u);
    }
    precise float dl = d * float(scale);
    precise float ml = dmin * float(min_q);
    const uint chunk = group / 2u, part = group % 2u;
    for (uint l = 0u; l < 32u; ++l) {
      const uint b = byte_at(qs + 32u * chunk + l);
      const uint code = part == 0u ? (b & 0xFu) : (b >> 4u);
      precise float v = dl * float(code) - ml;
      w[32u * group + l] = v;
    }
  }
}
