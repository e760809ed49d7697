#version 450
// matmul with Q2_K weights (src/quant/dequantize.cpp's decode): a 256-element
// super-block of 16 bytes of scales (a 4-bit scale and a 4-bit min per group
// of 16), 64 bytes of 2-bit codes, then fp16 d and dmin; x = d * scale * q -
// dmin * min. Each 128-element half reads its 32 bytes of codes four times,
// two bits at a time, each pass covering two groups. `precise`: the product
// and the difference are rounded separately, as the reference decoder does.
#define BLOCK_ELEMS 256u
#define BLOCK_BYTES 84u
#include "matmul.glsl"
#include "k_quant_bytes.glsl"

void decode_block(uint offset, out float w[BLOCK_ELEMS]) {
  const float d = load_f16(offset + 80u);
  const float dmin = load_f16(offset + 82u);
  uint group = 0u;
  for (uint half_index = 0u; half_index < 2u; ++half_index) {
    const uint qs = offset + 16u + 32u * half_index;
    for (uint shift = 0u; shift < 8u; shift += 2u) {
      for (uint part = 0u; part < 2u; ++part, ++group) {
        const uint sc = byte_at(offset + group);
        precise float dl = d * float(sc & 0xFu);
        precise float ml = dmin * float(sc >> 4u);
        for (uint l = 0u; l < 16u; ++l) {
          const uint code = (byte_at(qs + l + 16u * part) >> shift) & 3u;
          precise float v = dl * float(code) - ml;
          w[16u * group + l] = v;
        }
      }
    }
  }
}
