// fp16 rounding as base/fp16.hpp does it, for shaders that round floats
// to halves (the GELU table's index, an f16 KV cache's rows).

// The fp16 bits of v, rounded to nearest even (packHalf2x16 leaves the
// rounding to the implementation); infinities for what overflows.
uint fp16_bits(float v) {
  const uint x = floatBitsToUint(v);
  const uint sign = (x >> 16) & 0x8000u;
  const uint e = (x >> 23) & 0xffu;
  uint m = x & 0x7fffffu;
  if (e == 0xffu) return sign | 0x7c00u | (m != 0u ? 0x200u : 0u);
  const int ex = int(e) - 112;  // the fp16 exponent field
  if (ex >= 31) return sign | 0x7c00u;
  if (ex <= 0) {  // a subnormal fp16, or zero
    if (ex < -10) return sign;
    m |= 0x800000u;
    const uint shift = uint(14 - ex);
    uint h = m >> shift;
    const uint rest = m & ((1u << shift) - 1u), half_way = 1u << (shift - 1u);
    if (rest > half_way || (rest == half_way && (h & 1u) != 0u)) h += 1u;
    return sign | h;
  }
  uint h = (uint(ex) << 10) | (m >> 13);
  const uint rest = m & 0x1fffu;
  // A carry out of the mantissa raises the exponent (to infinity at the top).
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u) != 0u)) h += 1u;
  return sign | h;
}
