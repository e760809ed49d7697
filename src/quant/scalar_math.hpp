// Scalar building blocks the quantizers share. Each one reproduces the
// reference quantizer's arithmetic exactly (same operations, same order), as
// the quantized bytes must match the peer's bit for bit.
#pragma once

#include <bit>
#include <cstdint>

namespace cortiq::quant {

// Groups whose largest magnitude is below this are stored as all zero.
inline constexpr float kGroupMaxEps = 1e-15f;

// Round to nearest, ties to even, for |value| <= 2^22. Adding 1.5 * 2^23
// moves the integer into the low mantissa bits, where the FPU has already
// rounded it; this is faster than lrintf and, more to the point, what the
// reference does, so out-of-range inputs wrap the same way too.
inline int nearest_int(float value) {
  const float shifted = value + 12582912.0f;
  return static_cast<int>(std::bit_cast<uint32_t>(shifted) & 0x007fffffu) - 0x00400000;
}

// Half of the E8M0 scale 2^(e - 127), i.e. 2^(e - 128): MXFP4 stores its
// E2M1 codes doubled, so the halved scale gives the true value. e = 0 and 1
// are fp32 subnormals; e = 255 is 2^127 (no NaN).
inline float e8m0_to_fp32_half(uint8_t e) {
  const uint32_t bits = e < 2 ? 0x00200000u << e : static_cast<uint32_t>(e - 1) << 23;
  return std::bit_cast<float>(bits);
}

}  // namespace cortiq::quant
