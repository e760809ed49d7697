#version 450
// matmul with Q6_K weights (src/quant/dequantize.cpp's decode): a 256-element
// super-block of 128 bytes of low nibbles, 64 of high 2-bit pairs, 16 signed
// 8-bit scales (one per 16 elements) and an fp16 d; x = d * scale * (q - 32),
// rounded as the reference: (d * scale) * q.
#define BLOCK_ELEMS 256u
#define BLOCK_BYTES 210u
#include "matmul.glsl"
#include "k_quant_bytes.glsl"

void decode_block(uint offset, out float w[BLOCK_ELEMS]) {
  const float d = load_f16(offset + 208u);
  for (uint half_index = 0u; half_index < 2u; ++half_index) {
    const uint ql = offset + 64u * half_index;
    const uint qh = offset + 128u + 32u * half_index;
    const uint sc = offset + 192u + 8u * half_index;
    for (uint l = 0u; l < 32u; ++l) {
      const uint group = l / 16u;
      const uint high = byte_at(qh + l);
      for (uint k = 0u; k < 4u; ++k) {
        const uint low = k < 2u ? (byte_at(ql + l + 32u * k) & 0xFu)
                                : (byte_at(ql + l + 32u * (k - 2u)) >> 4u);
        const int code = int(low | (((high >> (2u * k)) & 3u) << 4u)) - 32;
        precise float ds = d * float(signed_byte_at(sc + group + 2u * k));
        precise float v = ds * float(code);
        w[128u * half_index + 32u * k + l] = v;
      }
    }
  }
}
