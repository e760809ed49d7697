// The K-quant x Q8_K integer dot products: the dispatch and the scalar
// kernels, which define the order of operations every SIMD level follows.
//
// Per super-block b, in order, with a = activation block b, w = weight
// block b, fp16 scales converted exactly (fp16_to_fp32) and every integer
// sum exact in int32:
//
//   Q4_K, Q5_K  isum = sum_j sc_j * sum_l q * a.qs         (8 groups of 32)
//               imin = sum_j m_j * (bsums[2j] + bsums[2j+1])
//               acc = fma(a.d * d, float(isum), acc)
//               acc = fma(-(a.d * dmin), float(imin), acc)
//   Q2_K        isum = sum_j (sc_j & 15) * sum_l q * a.qs  (16 groups of 16)
//               imin = sum_j (sc_j >> 4) * bsums[j]
//               then the two fma as Q4_K
//   Q3_K        isum = sum_j (sc_j - 32) * (sum_l q * a.qs - 4 * bsums[j]),
//               q = 3-bit code 0..7 (low 2 bits | high bit << 2)
//               acc = fma(a.d * d, float(isum), acc)
//   Q6_K        isum = sum_j sc_j * (sum_l q * a.qs - 32 * bsums[j]), q 0..63
//               acc = fma(a.d * d, float(isum), acc)
//   IQ4_XS      isum = sum_j (ls_j - 32) * sum_l kIq4nlValues[q] * a.qs
//               acc = fma(a.d * d, float(isum), acc)
//
// with acc = 0 before the first block and out = acc after the last. The
// products a.d * d are plain float multiplies (no contraction: the project
// builds with -ffp-contract=off); float(isum) rounds to nearest. These are
// mathematically sum_i dequant(w)_i * (a.d * a.qs_i), since every group's
// bsums entry is the sum of its activation codes.
//
// Ranges (|a.qs| <= 127): the largest |isum| is Q6_K's 256 * 32 * 128 * 127
// < 2^28, so int32 never overflows.
#include "kernels/cpu/dot_kquants.hpp"

#include <cmath>
#include <cstring>

#include "base/cpu_features.hpp"
#include "base/fp16.hpp"
#include "quant/blocks.hpp"
#include "quant/k_scales.hpp"

namespace cortiq::kernels {

namespace scalar {
namespace {

using namespace quant;

// The two-term update of the types with mins (Q2_K, Q4_K, Q5_K).
float fold_with_min(float acc, float ad, uint16_t d, uint16_t dmin, int32_t isum, int32_t imin) {
  const float dl = ad * fp16_to_fp32(d);
  const float ml = ad * fp16_to_fp32(dmin);
  acc = std::fma(dl, static_cast<float>(isum), acc);
  return std::fma(-ml, static_cast<float>(imin), acc);
}

float fold(float acc, float ad, uint16_t d, int32_t isum) {
  return std::fma(ad * fp16_to_fp32(d), static_cast<float>(isum), acc);
}

// Q4_K (kFifth = false) and Q5_K: group j = 2c + p holds elements
// 64c + 32p + l, the low (p = 0) or high nibbles of qs[32c + l], plus 16
// when bit j of qh[l] is set (Q5_K).
template <typename Block, bool kFifth>
float k4_block(float acc, const std::byte* block, const Q8BlockK& x) {
  const Block w = load_block<Block>(block);
  int32_t isum = 0;
  int32_t imin = 0;
  for (int j = 0; j < 8; ++j) {
    const int c = j / 2;
    const int p = j % 2;
    const ScaleAndMin sm = k4_scale_and_min(j, w.scales);
    int32_t dot = 0;
    for (int l = 0; l < 32; ++l) {
      const uint8_t byte = w.qs[32 * c + l];
      int q = p == 0 ? byte & 0xF : byte >> 4;
      if constexpr (kFifth) q += (w.qh[l] >> j) & 1 ? 16 : 0;
      dot += q * x.qs[32 * j + l];
    }
    isum += sm.scale * dot;
    imin += sm.min * (x.bsums[2 * j] + x.bsums[2 * j + 1]);
  }
  return fold_with_min(acc, x.d, w.d, w.dmin, isum, imin);
}

// Q2_K: element 128h + 32k + i (i < 32) is bits 2k of qs[32h + i], group
// 8h + 2k + i / 16.
float q2_k_block(float acc, const std::byte* block, const Q8BlockK& x) {
  const BlockQ2_K w = load_block<BlockQ2_K>(block);
  int32_t isum = 0;
  int32_t imin = 0;
  for (int g = 0; g < 16; ++g) {
    const int h = g / 8;
    const int k = (g % 8) / 2;
    const int part = g % 2;
    int32_t dot = 0;
    for (int l = 0; l < 16; ++l) {
      const int i = 16 * part + l;
      dot += ((w.qs[32 * h + i] >> (2 * k)) & 3) * x.qs[16 * g + l];
    }
    isum += (w.scales[g] & 0xF) * dot;
    imin += (w.scales[g] >> 4) * x.bsums[g];
  }
  return fold_with_min(acc, x.d, w.d, w.dmin, isum, imin);
}

// Q3_K: the Q2_K walk; bit 4h + k of hmask[i] is the third bit.
float q3_k_block(float acc, const std::byte* block, const Q8BlockK& x) {
  const BlockQ3_K w = load_block<BlockQ3_K>(block);
  int32_t isum = 0;
  for (int g = 0; g < 16; ++g) {
    const int h = g / 8;
    const int k = (g % 8) / 2;
    const int part = g % 2;
    int32_t dot = 0;
    for (int l = 0; l < 16; ++l) {
      const int i = 16 * part + l;
      const int q = ((w.qs[32 * h + i] >> (2 * k)) & 3) | (((w.hmask[i] >> (4 * h + k)) & 1) << 2);
      dot += q * x.qs[16 * g + l];
    }
    isum += q3_k_scale(g, w.scales) * (dot - 4 * x.bsums[g]);
  }
  return fold(acc, x.d, w.d, isum);
}

// Q6_K: element 128h + 32k + l has its low nibble in ql[64h + l + 32 (k % 2)]
// (high nibble for k >= 2), its top bits at bit 2k of qh[32h + l]; group
// 8h + 2k + l / 16.
float q6_k_block(float acc, const std::byte* block, const Q8BlockK& x) {
  const BlockQ6_K w = load_block<BlockQ6_K>(block);
  int32_t isum = 0;
  for (int g = 0; g < 16; ++g) {
    const int h = g / 8;
    const int k = (g % 8) / 2;
    const int part = g % 2;
    int32_t dot = 0;
    for (int i = 0; i < 16; ++i) {
      const int l = 16 * part + i;
      const uint8_t low_byte = w.ql[64 * h + l + 32 * (k % 2)];
      const int low = k < 2 ? low_byte & 0xF : low_byte >> 4;
      const int q = low | (((w.qh[32 * h + l] >> (2 * k)) & 3) << 4);
      dot += q * x.qs[16 * g + i];
    }
    isum += w.scales[g] * (dot - 32 * x.bsums[g]);
  }
  return fold(acc, x.d, w.d, isum);
}

// IQ4_XS: group j (32 elements) is the low then the high nibbles of
// qs[16j .. 16j + 15], mapped through kIq4nlValues.
float iq4_xs_block(float acc, const std::byte* block, const Q8BlockK& x) {
  const BlockIq4Xs w = load_block<BlockIq4Xs>(block);
  int32_t isum = 0;
  for (int j = 0; j < 8; ++j) {
    const int low = (w.scales_l[j / 2] >> (4 * (j % 2))) & 0xF;
    const int high = (w.scales_h >> (2 * j)) & 3;
    const int ls = (low | (high << 4)) - 32;
    int32_t dot = 0;
    for (int l = 0; l < 16; ++l) {
      const uint8_t byte = w.qs[16 * j + l];
      dot += kIq4nlValues[byte & 0xF] * x.qs[32 * j + l];
      dot += kIq4nlValues[byte >> 4] * x.qs[32 * j + 16 + l];
    }
    isum += ls * dot;
  }
  return fold(acc, x.d, w.d, isum);
}

// A row: the block steps in order from acc = 0.
template <KQuantBlockStep Step, size_t kBlockBytes>
void rows(const std::byte* row, const Q8BlockK* a, int64_t a_stride, int n_act, int64_t n_blocks,
          float* out) {
  for (int i = 0; i < n_act; ++i) {
    float acc = 0.0f;
    for (int64_t b = 0; b < n_blocks; ++b) {
      acc = Step(acc, row + static_cast<size_t>(b) * kBlockBytes, a[i * a_stride + b]);
    }
    out[i] = acc;
  }
}

}  // namespace

KQuantBlockStep kquant_block_step(GgmlType type) {
  switch (type) {
    case GgmlType::Q2_K:
      return q2_k_block;
    case GgmlType::Q3_K:
      return q3_k_block;
    case GgmlType::Q4_K:
      return k4_block<BlockQ4_K, false>;
    case GgmlType::Q5_K:
      return k4_block<BlockQ5_K, true>;
    case GgmlType::Q6_K:
      return q6_k_block;
    case GgmlType::IQ4_XS:
      return iq4_xs_block;
    default:
      return nullptr;
  }
}

KQuantDot kquant_dot(GgmlType type) {
  switch (type) {
    case GgmlType::Q2_K:
      return rows<q2_k_block, sizeof(BlockQ2_K)>;
    case GgmlType::Q3_K:
      return rows<q3_k_block, sizeof(BlockQ3_K)>;
    case GgmlType::Q4_K:
      return rows<k4_block<BlockQ4_K, false>, sizeof(BlockQ4_K)>;
    case GgmlType::Q5_K:
      return rows<k4_block<BlockQ5_K, true>, sizeof(BlockQ5_K)>;
    case GgmlType::Q6_K:
      return rows<q6_k_block, sizeof(BlockQ6_K)>;
    case GgmlType::IQ4_XS:
      return rows<iq4_xs_block, sizeof(BlockIq4Xs)>;
    default:
      return nullptr;
  }
}

}  // namespace scalar

KQuantDot kquant_dot(GgmlType type) {
#if defined(__x86_64__)
  if (simd_level() >= SimdLevel::avx2) {
    if (KQuantDot kernel = avx2::kquant_dot(type)) return kernel;
  }
#endif
  return scalar::kquant_dot(type);
}

}  // namespace cortiq::kernels
