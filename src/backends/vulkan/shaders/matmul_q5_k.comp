#version 450
// matmul with Q5_K weights: Q4_K's layout (fp16 d and dmin, 12 bytes of
// packed 6-bit scales and mins) with 32 bytes of fifth bits before the
// nibbles; element l of group g takes bit g of qh[l]. x = d * scale * q -
// dmin * min, rounded as the reference decoder does.
#define BLOCK_ELEMS 256u
#define BLOCK_BYTES 176u
#include "matmul.glsl"
#include "k_quant_bytes.glsl"

void decode_block(uint offset, out float w[BLOCK_ELEMS]) {
  const float d = load_f16(offset);
  const float dmin = load_f16(offset + 2u);
  const uint scales = offset + 4u, qh = offset + 16u, qs = offset + 48u;
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
      const uint low = part == 0u ? (b & 0xFu) : (b >> 4u);
      const uint code = low + (((byte_at(qh + l) >> group) & 1u) != 0u ? 16u : 0u);
      precise float v = dl * float(code) - ml;
      w[32u * group + l] = v;
    }
  }
}
