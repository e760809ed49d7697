#version 450
// matmul with Q3_K weights (src/quant/dequantize.cpp's decode): a 256-element
// super-block of 32 bytes of high bits (hmask), 64 bytes of low 2-bit codes,
// 12 bytes of packed 6-bit scales (biased by 32) and an fp16 d; the same
// 2-bit walk as Q2_K, where a clear high bit subtracts 4 from the code:
// x = (d * scale) * code.
#define BLOCK_ELEMS 256u
#define BLOCK_BYTES 110u
#include "matmul.glsl"
#include "k_quant_bytes.glsl"

// Group j's scale (quant/k_scales.hpp's q3_k_scale): low nibbles of bytes
// 0..7 for groups 0..7, their high nibbles for 8..15, the top two bits in
// byte 8 + j % 4 at bit 2 * (j / 4).
int q3_k_scale(uint scales, uint group) {
  const uint low = group < 8u ? (byte_at(scales + group) & 0xFu) : (byte_at(scales + group - 8u) >> 4u);
  const uint high = (byte_at(scales + 8u + group % 4u) >> (2u * (group / 4u))) & 3u;
  return int(low | (high << 4u)) - 32;
}

void decode_block(uint offset, out float w[BLOCK_ELEMS]) {
  const float d = load_f16(offset + 108u);
  const uint hmask = offset, scales = offset + 96u;
  uint group = 0u;
  uint mask = 1u;
  for (uint half_index = 0u; half_index < 2u; ++half_index) {
    const uint qs = offset + 32u + 32u * half_index;
    for (uint shift = 0u; shift < 8u; shift += 2u, mask <<= 1u) {
      for (uint part = 0u; part < 2u; ++part, ++group) {
        precise float dl = d * float(q3_k_scale(scales, group));
        for (uint l = 0u; l < 16u; ++l) {
          const uint i = l + 16u * part;
          const int low = int((byte_at(qs + i) >> shift) & 3u);
          const int code = low - ((byte_at(hmask + i) & mask) != 0u ? 0 : 4);
          precise float v = dl * float(code);
          w[16u * group + l] = v;
        }
      }
    }
  }
}
