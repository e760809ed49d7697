// Reference quantizers of the K super-block formats (Q2_K..Q6_K), without
// an importance matrix. Each super-block goes in three steps:
//   1. per group, search a scale (and min) and codes (k_quant_search.hpp);
//   2. quantize the group scales against the super-block scale(s) in fp16;
//   3. re-derive every code from the scales as they will be decoded, so the
//      codes fit the stored scales rather than the unrounded ones.
// Steps, constants and float arithmetic are the peer's, for identical bytes.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>

#include "base/fp16.hpp"
#include "quant/k_quant_search.hpp"
#include "quant/k_scales.hpp"
#include "quant/quantizers.hpp"
#include "quant/scalar_math.hpp"

namespace cortiq::quant {
namespace {

using Values = std::span<const float, kSuperBlock>;

// Groups' scales and mins and the largest of each (both are >= 0 for the
// affine types; a larger value only replaces a smaller one).
template <size_t NGroups>
struct AffineGroups {
  std::array<float, NGroups> scales{};
  std::array<float, NGroups> mins{};
  float max_scale = 0.0f;
  float max_min = 0.0f;
};

// Re-derives the affine codes of one group from its decoded scale d and min
// dm; keeps the searched codes when d is zero (nothing to divide by).
void requantize_affine(std::span<const float> x, float d, float dm, int nmax,
                       std::span<uint8_t> codes) {
  if (d == 0.0f) return;
  for (size_t i = 0; i < x.size(); ++i) {
    codes[i] = static_cast<uint8_t>(std::clamp(nearest_int((x[i] + dm) / d), 0, nmax));
  }
}

// Codes of four 32-element quarters share a byte, two bits each: Q2_K and
// Q3_K lay out each 128-element half so.
template <typename Code>
void pack_2bit(const std::array<Code, kSuperBlock>& codes,
               std::array<uint8_t, kSuperBlock / 4>& qs) {
  for (int half = 0; half < kSuperBlock; half += 128) {
    for (int l = 0; l < 32; ++l) {
      const int c = half + l;
      qs[half / 4 + l] = static_cast<uint8_t>(codes[c] | (codes[c + 32] << 2) |
                                              (codes[c + 64] << 4) | (codes[c + 96] << 6));
    }
  }
}

// ---- Q2_K: 16 groups of 16, 2-bit codes, 4-bit scales and mins.

void encode_q2_k(Values x, BlockQ2_K& b) {
  constexpr float kScaleLevels = 15.0f;
  std::array<uint8_t, kSuperBlock> codes{};
  std::array<uint8_t, 16> scratch{};
  std::array<float, 16> weights{};
  AffineGroups<16> groups;
  for (int j = 0; j < 16; ++j) {
    const auto group = x.subspan(16 * j, 16);
    for (int l = 0; l < 16; ++l) weights[l] = std::fabs(group[l]);
    const ScaleMin sm = search_affine_scale(3, group, weights, std::span(codes).subspan(16 * j, 16),
                                            scratch, -0.5f, 0.1f, 15, true);
    groups.scales[j] = sm.scale;
    groups.mins[j] = sm.min;
    if (sm.scale > groups.max_scale) groups.max_scale = sm.scale;
    if (sm.min > groups.max_min) groups.max_min = sm.min;
  }

  if (groups.max_scale > 0) {
    const float iscale = kScaleLevels / groups.max_scale;
    for (int j = 0; j < 16; ++j) {
      b.scales[j] = static_cast<uint8_t>(nearest_int(iscale * groups.scales[j]));
    }
    b.d = fp32_to_fp16(groups.max_scale / kScaleLevels);
  } else {
    b.d = fp32_to_fp16(0.0f);
  }
  if (groups.max_min > 0) {
    const float iscale = kScaleLevels / groups.max_min;
    for (int j = 0; j < 16; ++j) {
      const int level = nearest_int(iscale * groups.mins[j]);
      b.scales[j] = static_cast<uint8_t>(b.scales[j] | (level << 4));
    }
    b.dmin = fp32_to_fp16(groups.max_min / kScaleLevels);
  } else {
    b.dmin = fp32_to_fp16(0.0f);
  }

  for (int j = 0; j < 16; ++j) {
    const float d = fp16_to_fp32(b.d) * static_cast<float>(b.scales[j] & 0xF);
    const float dm = fp16_to_fp32(b.dmin) * static_cast<float>(b.scales[j] >> 4);
    requantize_affine(x.subspan(16 * j, 16), d, dm, 3, std::span(codes).subspan(16 * j, 16));
  }
  pack_2bit(codes, b.qs);
}

// ---- Q3_K: 16 groups of 16, 3-bit signed codes, 6-bit signed scales.

void pack_q3_k_scales(const std::array<float, 16>& scales, float iscale, BlockQ3_K& b) {
  for (int j = 0; j < 16; ++j) {
    // The peer narrows to int8 before clamping; kept for identical bytes.
    const auto narrowed = static_cast<int8_t>(nearest_int(iscale * scales[j]));
    const int level = std::max(-32, std::min(31, static_cast<int>(narrowed))) + 32;
    if (j < 8) {
      b.scales[j] = static_cast<uint8_t>(level & 0xF);
    } else {
      b.scales[j - 8] = static_cast<uint8_t>(b.scales[j - 8] | ((level & 0xF) << 4));
    }
    b.scales[8 + j % 4] =
        static_cast<uint8_t>(b.scales[8 + j % 4] | ((level >> 4) << (2 * (j / 4))));
  }
}

// Q3_K keeps the top bit of each 3-bit code in hmask: bit k of byte m is
// element 32 * k + m. Leaves the low 2 bits in `codes`.
void split_q3_k_high_bits(std::array<int8_t, kSuperBlock>& codes, BlockQ3_K& b) {
  for (int j = 0; j < kSuperBlock; ++j) {
    if (codes[j] > 3) {
      b.hmask[j % 32] = static_cast<uint8_t>(b.hmask[j % 32] | (1u << (j / 32)));
      codes[j] = static_cast<int8_t>(codes[j] - 4);
    }
  }
}

void encode_q3_k(Values x, BlockQ3_K& b) {
  std::array<int8_t, kSuperBlock> codes{};
  std::array<float, 16> scales{};
  float max_scale = 0.0f;
  float max_magnitude = 0.0f;
  for (int j = 0; j < 16; ++j) {
    scales[j] = search_symmetric_scale_refined(4, x.subspan(16 * j, 16),
                                               std::span(codes).subspan(16 * j, 16));
    const float magnitude = std::fabs(scales[j]);
    if (magnitude > max_magnitude) {
      max_magnitude = magnitude;
      max_scale = scales[j];
    }
  }

  if (max_scale != 0.0f) {
    const float iscale = -32.0f / max_scale;
    pack_q3_k_scales(scales, iscale, b);
    b.d = fp32_to_fp16(1 / iscale);
  } else {
    b.d = fp32_to_fp16(0.0f);
  }

  for (int j = 0; j < 16; ++j) {
    const float d = fp16_to_fp32(b.d) * static_cast<float>(q3_k_scale(j, b.scales));
    if (d == 0.0f) continue;
    for (int i = 16 * j; i < 16 * j + 16; ++i) {
      codes[i] = static_cast<int8_t>(std::clamp(nearest_int(x[i] / d), -4, 3) + 4);
    }
  }
  split_q3_k_high_bits(codes, b);
  pack_2bit(codes, b.qs);
}

// ---- Q4_K / Q5_K: 8 groups of 32, 6-bit scales and mins.

// Searches the 8 groups; the weights favour larger values over a floor of
// the group's RMS.
template <int Nmax>
AffineGroups<8> search_k4_groups(Values x, std::array<uint8_t, kSuperBlock>& codes, float rmin,
                                 int nstep) {
  AffineGroups<8> groups;
  std::array<float, 32> weights{};
  std::array<uint8_t, 32> scratch{};
  for (int j = 0; j < 8; ++j) {
    const auto group = x.subspan(32 * j, 32);
    float sum_x2 = 0.0f;
    for (const float v : group) sum_x2 += v * v;
    const float av_x = std::sqrt(sum_x2 / 32.0f);
    for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(group[l]);
    const ScaleMin sm =
        search_affine_scale(Nmax, group, weights, std::span(codes).subspan(32 * j, 32), scratch,
                            rmin, 0.1f, nstep, false);
    groups.scales[j] = sm.scale;
    groups.mins[j] = sm.min;
    if (sm.scale > groups.max_scale) groups.max_scale = sm.scale;
    if (sm.min > groups.max_min) groups.max_min = sm.min;
  }
  return groups;
}

// Stores the 6-bit group scales and mins, the fp16 super-block scales, and
// re-derives the codes against them.
template <typename Block, int Nmax>
void store_k4_scales_and_requantize(Values x, const AffineGroups<8>& groups, Block& b,
                                    std::array<uint8_t, kSuperBlock>& codes) {
  const float inv_scale = groups.max_scale > 0 ? 63.0f / groups.max_scale : 0.0f;
  const float inv_min = groups.max_min > 0 ? 63.0f / groups.max_min : 0.0f;
  for (int j = 0; j < 8; ++j) {
    // Narrowed to uint8 before the clamp, as the peer does.
    const auto ls =
        std::min<uint8_t>(63, static_cast<uint8_t>(nearest_int(inv_scale * groups.scales[j])));
    const auto lm =
        std::min<uint8_t>(63, static_cast<uint8_t>(nearest_int(inv_min * groups.mins[j])));
    if (j < 4) {
      b.scales[j] = ls;
      b.scales[j + 4] = lm;
    } else {
      b.scales[j + 4] = static_cast<uint8_t>((ls & 0xF) | ((lm & 0xF) << 4));
      b.scales[j - 4] = static_cast<uint8_t>(b.scales[j - 4] | ((ls >> 4) << 6));
      b.scales[j] = static_cast<uint8_t>(b.scales[j] | ((lm >> 4) << 6));
    }
  }
  b.d = fp32_to_fp16(groups.max_scale / 63.0f);
  b.dmin = fp32_to_fp16(groups.max_min / 63.0f);

  for (int j = 0; j < 8; ++j) {
    const ScaleAndMin sm = k4_scale_and_min(j, b.scales);
    const float d = fp16_to_fp32(b.d) * static_cast<float>(sm.scale);
    const float dm = fp16_to_fp32(b.dmin) * static_cast<float>(sm.min);
    requantize_affine(x.subspan(32 * j, 32), d, dm, Nmax, std::span(codes).subspan(32 * j, 32));
  }
}

void encode_q4_k(Values x, BlockQ4_K& b) {
  std::array<uint8_t, kSuperBlock> codes{};
  const AffineGroups<8> groups = search_k4_groups<15>(x, codes, -1.0f, 20);
  store_k4_scales_and_requantize<BlockQ4_K, 15>(x, groups, b, codes);
  for (int chunk = 0; chunk < 4; ++chunk) {
    for (int l = 0; l < 32; ++l) {
      const int c = 64 * chunk + l;
      b.qs[32 * chunk + l] = static_cast<uint8_t>(codes[c] | (codes[c + 32] << 4));
    }
  }
}

void encode_q5_k(Values x, BlockQ5_K& b) {
  std::array<uint8_t, kSuperBlock> codes{};
  const AffineGroups<8> groups = search_k4_groups<31>(x, codes, -0.5f, 15);
  store_k4_scales_and_requantize<BlockQ5_K, 31>(x, groups, b, codes);
  // Element 64 * chunk + 32 * part + l: low nibble in qs, fifth bit at bit
  // 2 * chunk + part of qh[l].
  for (int chunk = 0; chunk < 4; ++chunk) {
    for (int l = 0; l < 32; ++l) {
      int low = codes[64 * chunk + l];
      int high = codes[64 * chunk + 32 + l];
      if (low > 15) {
        low -= 16;
        b.qh[l] = static_cast<uint8_t>(b.qh[l] | (1u << (2 * chunk)));
      }
      if (high > 15) {
        high -= 16;
        b.qh[l] = static_cast<uint8_t>(b.qh[l] | (2u << (2 * chunk)));
      }
      b.qs[32 * chunk + l] = static_cast<uint8_t>(low | (high << 4));
    }
  }
}

// ---- Q6_K: 16 groups of 16, 6-bit codes, 8-bit signed scales.

void pack_q6_k(const std::array<int8_t, kSuperBlock>& codes, BlockQ6_K& b) {
  for (int half = 0; half < 2; ++half) {
    uint8_t* ql = b.ql.data() + 64 * half;
    uint8_t* qh = b.qh.data() + 32 * half;
    const int8_t* c = codes.data() + 128 * half;
    for (int l = 0; l < 32; ++l) {
      ql[l] = static_cast<uint8_t>((c[l] & 0xF) | ((c[l + 64] & 0xF) << 4));
      ql[l + 32] = static_cast<uint8_t>((c[l + 32] & 0xF) | ((c[l + 96] & 0xF) << 4));
      qh[l] = static_cast<uint8_t>((c[l] >> 4) | ((c[l + 32] >> 4) << 2) | ((c[l + 64] >> 4) << 4) |
                                   ((c[l + 96] >> 4) << 6));
    }
  }
}

void encode_q6_k(Values x, BlockQ6_K& b) {
  std::array<int8_t, kSuperBlock> codes{};
  std::array<float, 16> scales{};
  float max_scale = 0.0f;
  float max_magnitude = 0.0f;
  for (int j = 0; j < 16; ++j) {
    scales[j] =
        search_symmetric_scale(32, x.subspan(16 * j, 16), std::span(codes).subspan(16 * j, 16));
    const float magnitude = std::fabs(scales[j]);
    if (magnitude > max_magnitude) {
      max_magnitude = magnitude;
      max_scale = scales[j];
    }
  }
  if (max_magnitude < kGroupMaxEps) {
    b = BlockQ6_K{};  // all codes and scales zero, d = +0
    return;
  }

  const float iscale = -128.0f / max_scale;
  b.d = fp32_to_fp16(1 / iscale);
  for (int j = 0; j < 16; ++j) {
    b.scales[j] = static_cast<int8_t>(std::min(127, nearest_int(iscale * scales[j])));
  }
  for (int j = 0; j < 16; ++j) {
    const float d = fp16_to_fp32(b.d) * static_cast<float>(b.scales[j]);
    if (d == 0.0f) continue;
    for (int i = 16 * j; i < 16 * j + 16; ++i) {
      codes[i] = static_cast<int8_t>(std::clamp(nearest_int(x[i] / d), -32, 31) + 32);
    }
  }
  pack_q6_k(codes, b);
}

}  // namespace

void quantize_q2_k(std::span<const float> src, std::span<std::byte> dst) {
  encode_blocks<BlockQ2_K, kSuperBlock>(src, dst, encode_q2_k);
}
void quantize_q3_k(std::span<const float> src, std::span<std::byte> dst) {
  encode_blocks<BlockQ3_K, kSuperBlock>(src, dst, encode_q3_k);
}
void quantize_q4_k(std::span<const float> src, std::span<std::byte> dst) {
  encode_blocks<BlockQ4_K, kSuperBlock>(src, dst, encode_q4_k);
}
void quantize_q5_k(std::span<const float> src, std::span<std::byte> dst) {
  encode_blocks<BlockQ5_K, kSuperBlock>(src, dst, encode_q5_k);
}
void quantize_q6_k(std::span<const float> src, std::span<std::byte> dst) {
  encode_blocks<BlockQ6_K, kSuperBlock>(src, dst, encode_q6_k);
}

}  // namespace cortiq::quant
