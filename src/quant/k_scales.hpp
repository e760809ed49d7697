// The packed 6-bit group scales of the K super-blocks, shared by the
// dequantizers and the quantizers (which re-read what they packed).
#pragma once

#include <array>
#include <cstdint>

namespace cortiq::quant {

struct ScaleAndMin {
  uint8_t scale;
  uint8_t min;
};

// Q4_K / Q5_K: 8 (scale, min) pairs of 6 bits in 12 bytes. Pairs 0..3 sit in
// the low 6 bits of bytes 0..3 (scales) and 4..7 (mins); pairs 4..7 keep
// their low nibbles in bytes 8..11 and their top 2 bits in the spare top
// bits of bytes 0..7.
inline ScaleAndMin k4_scale_and_min(int group, const std::array<uint8_t, 12>& packed) {
  if (group < 4) {
    return {static_cast<uint8_t>(packed[group] & 63), static_cast<uint8_t>(packed[group + 4] & 63)};
  }
  const auto scale =
      static_cast<uint8_t>((packed[group + 4] & 0xF) | ((packed[group - 4] >> 6) << 4));
  const auto min = static_cast<uint8_t>((packed[group + 4] >> 4) | ((packed[group] >> 6) << 4));
  return {scale, min};
}

// Q3_K: 16 six-bit scales stored with a bias of 32. Low nibbles: groups
// 0..7 in the low halves of bytes 0..7, groups 8..15 in their high halves;
// the top 2 bits of group j are in byte 8 + j % 4 at bit 2 * (j / 4).
inline int q3_k_scale(int group, const std::array<uint8_t, 12>& packed) {
  const int low = group < 8 ? packed[group] & 0xF : packed[group - 8] >> 4;
  const int high = (packed[8 + group % 4] >> (2 * (group / 4))) & 3;
  return (low | (high << 4)) - 32;
}

}  // namespace cortiq::quant
