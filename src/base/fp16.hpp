// IEEE half (fp16) and bfloat16 scalar conversions, exact and branch-light.
// Row conversions with SIMD live in kernels/cpu/convert.hpp.
#pragma once

#include <bit>
#include <cstdint>

namespace cortiq {

// fp16 -> fp32, exact for every input including subnormals, inf and NaN
// (the NaN payload is kept).
inline float fp16_to_fp32(uint16_t h) {
  const uint32_t w = static_cast<uint32_t>(h) << 16;
  const uint32_t sign = w & 0x80000000u;
  const uint32_t two_w = w + w;
  // Normal numbers: shift the exponent/mantissa into place and rebias by
  // multiplying with 2^-112 (exact); inf/NaN land on the top exponent.
  constexpr uint32_t exp_offset = 0xE0u << 23;
  constexpr float exp_scale = 0x1.0p-112f;
  const float normalized = std::bit_cast<float>((two_w >> 4) + exp_offset) * exp_scale;
  // Subnormals: build 0.5 + m * 2^-24 style float and subtract the magic.
  constexpr uint32_t magic_mask = 126u << 23;
  constexpr float magic_bias = 0.5f;
  const float denormalized = std::bit_cast<float>((two_w >> 17) | magic_mask) - magic_bias;
  constexpr uint32_t denormalized_cutoff = 1u << 27;
  const uint32_t result =
      sign | (two_w < denormalized_cutoff ? std::bit_cast<uint32_t>(denormalized)
                                          : std::bit_cast<uint32_t>(normalized));
  return std::bit_cast<float>(result);
}

// fp32 -> fp16 with round-to-nearest-even; overflow goes to inf, NaN stays NaN.
inline uint16_t fp32_to_fp16(float f) {
  constexpr float scale_to_inf = 0x1.0p+112f;
  constexpr float scale_to_zero = 0x1.0p-110f;
  float base = (f < 0 ? -f : f) * scale_to_inf * scale_to_zero;
  const uint32_t w = std::bit_cast<uint32_t>(f);
  const uint32_t shl1_w = w + w;
  const uint32_t sign = w & 0x80000000u;
  uint32_t bias = shl1_w & 0xFF000000u;
  if (bias < 0x71000000u) bias = 0x71000000u;
  // Adding 2^(e+...) rounds the mantissa at the fp16 position, in hardware.
  base = std::bit_cast<float>((bias >> 1) + 0x07800000u) + base;
  const uint32_t bits = std::bit_cast<uint32_t>(base);
  const uint32_t exp_bits = (bits >> 13) & 0x00007C00u;
  const uint32_t mantissa_bits = bits & 0x00000FFFu;
  const uint32_t nonsign = exp_bits + mantissa_bits;
  return static_cast<uint16_t>((sign >> 16) | (shl1_w > 0xFF000000u ? 0x7E00u : nonsign));
}

// bf16 -> fp32 is a shift: bf16 is the top half of an fp32.
inline float bf16_to_fp32(uint16_t b) {
  return std::bit_cast<float>(static_cast<uint32_t>(b) << 16);
}

// fp32 -> bf16 with round-to-nearest-even; NaN is kept quiet (never rounds to inf).
inline uint16_t fp32_to_bf16(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 64);
  return static_cast<uint16_t>((u + (0x7fffu + ((u >> 16) & 1u))) >> 16);
}

}  // namespace cortiq
