// Reference quantizers of the 32-element legacy formats: one scale (and for
// the _1 types a min) per block, taken from the block's extremes, no search.
// The conversions to small integers truncate after adding the rounding
// offset, as the peer's do, so the bytes match it exactly.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "base/fp16.hpp"
#include "quant/quantizers.hpp"

namespace cortiq::quant {
namespace {

using Values = std::span<const float, kBlock32>;

// The value of largest magnitude, keeping its sign; the first wins a tie.
float signed_absmax(Values x) {
  float amax = 0.0f;
  float max = 0.0f;
  for (const float v : x) {
    if (amax < std::fabs(v)) {
      amax = std::fabs(v);
      max = v;
    }
  }
  return max;
}

struct MinMax {
  float min = FLT_MAX;
  float max = -FLT_MAX;
};

MinMax min_max(Values x) {
  MinMax r;
  for (const float v : x) {
    if (v < r.min) r.min = v;
    if (v > r.max) r.max = v;
  }
  return r;
}

float inverse_or_zero(float d) {
  return d != 0.0f ? 1.0f / d : 0.0f;
}

// Symmetric: the extreme value maps to code 0 (x = d * (q - 2^(bits-1)) with
// d = max / -2^(bits-1)), the others round to nearest by adding 0.5.
template <int Bits>
struct SymmetricCodes {
  static constexpr int kOffset = 1 << (Bits - 1);
  float d;
  float id;
  explicit SymmetricCodes(Values x)
      : d(signed_absmax(x) / static_cast<float>(-kOffset)), id(inverse_or_zero(d)) {}
  uint8_t code(float v) const {
    const int q = static_cast<int8_t>(v * id + (static_cast<float>(kOffset) + 0.5f));
    return static_cast<uint8_t>(std::min((1 << Bits) - 1, q));
  }
};

// Affine: x = d * q + min with d = (max - min) / (2^bits - 1).
template <int Bits>
struct AffineCodes {
  float min;
  float d;
  float id;
  explicit AffineCodes(const MinMax& r)
      : min(r.min),
        d((r.max - r.min) / static_cast<float>((1 << Bits) - 1)),
        id(inverse_or_zero(d)) {}
};

// The fifth bits of 32 five-bit codes as Q5 blocks store them: bit j of a
// little-endian word for element j.
void store_fifth_bits(const std::array<uint8_t, kBlock32>& codes, std::array<uint8_t, 4>& qh,
                      std::array<uint8_t, kBlock32 / 2>& qs) {
  uint32_t high = 0;
  for (int j = 0; j < 16; ++j) {
    qs[j] = static_cast<uint8_t>((codes[j] & 0x0F) | ((codes[j + 16] & 0x0F) << 4));
    high |= static_cast<uint32_t>((codes[j] & 0x10u) >> 4) << j;
    high |= static_cast<uint32_t>((codes[j + 16] & 0x10u) >> 4) << (j + 16);
  }
  std::memcpy(qh.data(), &high, sizeof(high));
}

void pack_nibbles(const std::array<uint8_t, kBlock32>& codes,
                  std::array<uint8_t, kBlock32 / 2>& qs) {
  for (int j = 0; j < 16; ++j) qs[j] = static_cast<uint8_t>(codes[j] | (codes[j + 16] << 4));
}

void encode_q4_0(Values x, BlockQ4_0& b) {
  const SymmetricCodes<4> sym(x);
  b.d = fp32_to_fp16(sym.d);
  std::array<uint8_t, kBlock32> codes;
  for (int j = 0; j < kBlock32; ++j) codes[j] = sym.code(x[j]);
  pack_nibbles(codes, b.qs);
}

void encode_q4_1(Values x, BlockQ4_1& b) {
  const AffineCodes<4> aff(min_max(x));
  b.d = fp32_to_fp16(aff.d);
  b.m = fp32_to_fp16(aff.min);
  std::array<uint8_t, kBlock32> codes;
  for (int j = 0; j < kBlock32; ++j) {
    const float v = (x[j] - aff.min) * aff.id;
    codes[j] = static_cast<uint8_t>(std::min(15, static_cast<int>(static_cast<int8_t>(v + 0.5f))));
  }
  pack_nibbles(codes, b.qs);
}

void encode_q5_0(Values x, BlockQ5_0& b) {
  const SymmetricCodes<5> sym(x);
  b.d = fp32_to_fp16(sym.d);
  std::array<uint8_t, kBlock32> codes;
  for (int j = 0; j < kBlock32; ++j) codes[j] = sym.code(x[j]);
  store_fifth_bits(codes, b.qh, b.qs);
}

void encode_q5_1(Values x, BlockQ5_1& b) {
  const AffineCodes<5> aff(min_max(x));
  b.d = fp32_to_fp16(aff.d);
  b.m = fp32_to_fp16(aff.min);
  std::array<uint8_t, kBlock32> codes;
  // No clamp to 31: the peer has none, and (max - min) * id + 0.5 stays
  // below 32 for finite input.
  for (int j = 0; j < kBlock32; ++j) {
    codes[j] = static_cast<uint8_t>((x[j] - aff.min) * aff.id + 0.5f);
  }
  store_fifth_bits(codes, b.qh, b.qs);
}

void encode_q8_0(Values x, BlockQ8_0& b) {
  float amax = 0.0f;
  for (const float v : x) amax = std::max(amax, std::fabs(v));
  const float d = amax / 127.0f;
  const float id = inverse_or_zero(d);
  b.d = fp32_to_fp16(d);
  for (int j = 0; j < kBlock32; ++j) b.qs[j] = static_cast<int8_t>(std::round(x[j] * id));
}

}  // namespace

void quantize_q4_0(std::span<const float> src, std::span<std::byte> dst) {
  encode_blocks<BlockQ4_0, kBlock32>(src, dst, encode_q4_0);
}
void quantize_q4_1(std::span<const float> src, std::span<std::byte> dst) {
  encode_blocks<BlockQ4_1, kBlock32>(src, dst, encode_q4_1);
}
void quantize_q5_0(std::span<const float> src, std::span<std::byte> dst) {
  encode_blocks<BlockQ5_0, kBlock32>(src, dst, encode_q5_0);
}
void quantize_q5_1(std::span<const float> src, std::span<std::byte> dst) {
  encode_blocks<BlockQ5_1, kBlock32>(src, dst, encode_q5_1);
}
void quantize_q8_0(std::span<const float> src, std::span<std::byte> dst) {
  encode_blocks<BlockQ8_0, kBlock32>(src, dst, encode_q8_0);
}

}  // namespace cortiq::quant
