#version 450
// matmul with IQ4_XS weights (src/quant/dequantize.cpp's decode): a
// 256-element super-block of an fp16 d, 16 bits of high scale pairs
// (scales_h), 4 bytes of low scale nibbles (scales_l) and 128 bytes of
// nibbles; group g of 32 has the 6-bit scale s (biased by 32) and
// x = (d * s) * kIq4nlValues[q], low nibbles its first 16 elements.
#define BLOCK_ELEMS 256u
#define BLOCK_BYTES 136u
#include "matmul.glsl"
#include "k_quant_bytes.glsl"
#include "iq4_values.glsl"

void decode_block(uint offset, out float w[BLOCK_ELEMS]) {
  const float d = load_f16(offset);
  const uint scales_h = load_u16(offset + 2u);
  for (uint group = 0u; group < 8u; ++group) {
    const uint low = (byte_at(offset + 4u + group / 2u) >> (4u * (group % 2u))) & 0xFu;
    const uint high = (scales_h >> (2u * group)) & 3u;
    precise float dl = d * float(int(low | (high << 4u)) - 32);
    const uint qs = offset + 8u + 16u * group;
    for (uint j = 0u; j < 16u; ++j) {
      const uint b = byte_at(qs + j);
      precise float first = dl * kIq4nlValues[b & 0xFu];
      precise float second = dl * kIq4nlValues[b >> 4u];
      w[32u * group + j] = first;
      w[32u * group + j + 16u] = second;
    }
  }
}
