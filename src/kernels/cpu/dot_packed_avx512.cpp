// AVX-512 VNNI kernels over pairs of packed 8-row groups (dot_packed.hpp):
// sixteen weight rows' products land in the sixteen 32-bit lanes of one
// register, and vpdpbusd (unsigned bytes times signed bytes, four products
// summed into each int32 lane) replaces the AVX2 kernels' maddubs / add /
// madd chains. The integer sums are exact on both, and each block still ends
// in one convert and one FMA per output — the order of dot_packed.hpp, lane
// by lane, so the same bits as the scalar kernels.
//
// Several activation rows (prefill): a block's codes are unpacked once and
// taken through all the call's rows (up to kMaxPackedRows), the rows'
// accumulators living in `out`. One row (decode) has its own loop.
#include <immintrin.h>

#include "kernels/cpu/dot_packed.hpp"
#include "kernels/cpu/simd_avx512.hpp"

namespace cortiq::kernels::avx512 {

namespace {

constexpr int64_t kQ4Block = 144;  // packed_block_bytes(q4_0x8)
constexpr int64_t kQ8Block = 272;  // packed_block_bytes(q8_0x8)
constexpr int kCodes = 16;         // offset of the codes after the 8 fp16 scales

void zero_rows(int n_act, float* out) {
  for (int i = 0; i < n_act; ++i) _mm512_storeu_ps(out + 16 * i, _mm512_setzero_ps());
}

// acc (16 outputs of one activation row, in out) += float(isum) * (d * a.d).
void fold_block(__m512i isum, __m512 d, float a_d, float* acc) {
  _mm512_storeu_ps(acc,
                   _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(d, _mm512_set1_ps(a_d)),
                                   _mm512_loadu_ps(acc)));
}

// One activation row (decode): the accumulator stays in a register (a
// store and reload per block would chain every block's FMA through
// memory), and both groups' streams are prefetched.
template <void (*BlockSums)(const std::byte*, const std::byte*, const Q8Block32&, __m512i&),
          int64_t kBlockBytes>
void one_row(const std::byte* group, const Q8Block32* a, int64_t n_blocks, float* out) {
  const std::byte* second = group + n_blocks * kBlockBytes;
  __m512 acc = _mm512_setzero_ps();
  for (int64_t b = 0; b < n_blocks; ++b) {
    const std::byte* b0 = group + b * kBlockBytes;
    const std::byte* b1 = second + b * kBlockBytes;
    prefetch_ahead(b0, kBlockBytes);
    prefetch_ahead(b1, kBlockBytes);
    __m512i isum;
    BlockSums(b0, b1, a[b], isum);
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum),
                          _mm512_mul_ps(halves_pair8(b0, b1), _mm512_set1_ps(a[b].d)), acc);
  }
  _mm512_storeu_ps(out, acc);
}

// Q4_0: the nibbles 0..15 are the unsigned operand as they are; the -8
// offset is the accumulator's start, -8 * a.sum (exact integers, so where it
// enters does not matter). Two dependency chains (low and high nibbles)
// halve the wait on vpdpbusd's latency.
void q4_0_block_sums(const std::byte* b0, const std::byte* b1, const Q8Block32& x, __m512i& isum) {
  const __m512i low = _mm512_set1_epi8(0x0F);
  __m512i s_lo = _mm512_set1_epi32(-8 * x.sum);
  __m512i s_hi = _mm512_setzero_si512();
  for (int k = 0; k < 4; ++k) {
    const __m512i w = load_pair256(b0 + kCodes + 32 * k, b1 + kCodes + 32 * k);
    s_lo = _mm512_dpbusd_epi32(s_lo, _mm512_and_si512(w, low), broadcast4(x.qs + 4 * k));
    s_hi = _mm512_dpbusd_epi32(s_hi, _mm512_and_si512(_mm512_srli_epi16(w, 4), low),
                               broadcast4(x.qs + 16 + 4 * k));
  }
  isum = _mm512_add_epi32(s_lo, s_hi);
}

void q4_0x16(const std::byte* group, const Q8Block32* a, int64_t a_stride, int n_act,
             int64_t n_blocks, float* out) {
  if (n_act == 1) return one_row<q4_0_block_sums, kQ4Block>(group, a, n_blocks, out);
  const std::byte* second = group + n_blocks * kQ4Block;
  const __m512i low = _mm512_set1_epi8(0x0F);
  zero_rows(n_act, out);
  for (int64_t b = 0; b < n_blocks; ++b) {
    const std::byte* b0 = group + b * kQ4Block;
    const std::byte* b1 = second + b * kQ4Block;
    __m512i lo[4];
    __m512i hi[4];
    for (int k = 0; k < 4; ++k) {
      const __m512i w = load_pair256(b0 + kCodes + 32 * k, b1 + kCodes + 32 * k);
      lo[k] = _mm512_and_si512(w, low);
      hi[k] = _mm512_and_si512(_mm512_srli_epi16(w, 4), low);
    }
    const __m512 d = halves_pair8(b0, b1);
    const Q8Block32* ab = a + b;
    for (int i = 0; i < n_act; ++i, ab += a_stride) {
      const int8_t* q = ab->qs;
      __m512i s_lo = _mm512_set1_epi32(-8 * ab->sum);
      __m512i s_hi = _mm512_setzero_si512();
      for (int k = 0; k < 4; ++k) {
        s_lo = _mm512_dpbusd_epi32(s_lo, lo[k], broadcast4(q + 4 * k));
        s_hi = _mm512_dpbusd_epi32(s_hi, hi[k], broadcast4(q + 16 + 4 * k));
      }
      fold_block(_mm512_add_epi32(s_lo, s_hi), d, ab->d, out + 16 * i);
    }
  }
}

// Q8_0: signed times signed. The weight codes plus 128 (a sign-bit flip)
// are the unsigned operand, and 128 * a.sum comes off at the start:
// sum (w + 128) a - 128 sum a = sum w a, exactly.
void q8_0_block_sums(const std::byte* b0, const std::byte* b1, const Q8Block32& x, __m512i& isum) {
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  __m512i s0 = _mm512_set1_epi32(-128 * x.sum);
  __m512i s1 = _mm512_setzero_si512();
  for (int k = 0; k < 8; k += 2) {
    const __m512i w0 =
        _mm512_xor_si512(load_pair256(b0 + kCodes + 32 * k, b1 + kCodes + 32 * k), flip);
    const __m512i w1 =
        _mm512_xor_si512(load_pair256(b0 + kCodes + 32 * k + 32, b1 + kCodes + 32 * k + 32), flip);
    s0 = _mm512_dpbusd_epi32(s0, w0, broadcast4(x.qs + 4 * k));
    s1 = _mm512_dpbusd_epi32(s1, w1, broadcast4(x.qs + 4 * k + 4));
  }
  isum = _mm512_add_epi32(s0, s1);
}

void q8_0x16(const std::byte* group, const Q8Block32* a, int64_t a_stride, int n_act,
             int64_t n_blocks, float* out) {
  if (n_act == 1) return one_row<q8_0_block_sums, kQ8Block>(group, a, n_blocks, out);
  const std::byte* second = group + n_blocks * kQ8Block;
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  zero_rows(n_act, out);
  for (int64_t b = 0; b < n_blocks; ++b) {
    const std::byte* b0 = group + b * kQ8Block;
    const std::byte* b1 = second + b * kQ8Block;
    __m512i w[8];
    for (int k = 0; k < 8; ++k) {
      w[k] = _mm512_xor_si512(load_pair256(b0 + kCodes + 32 * k, b1 + kCodes + 32 * k), flip);
    }
    const __m512 d = halves_pair8(b0, b1);
    const Q8Block32* ab = a + b;
    for (int i = 0; i < n_act; ++i, ab += a_stride) {
      const int8_t* q = ab->qs;
      __m512i s0 = _mm512_set1_epi32(-128 * ab->sum);
      __m512i s1 = _mm512_setzero_si512();
      for (int k = 0; k < 8; k += 2) {
        s0 = _mm512_dpbusd_epi32(s0, w[k], broadcast4(q + 4 * k));
        s1 = _mm512_dpbusd_epi32(s1, w[k + 1], broadcast4(q + 4 * k + 4));
      }
      fold_block(_mm512_add_epi32(s0, s1), d, ab->d, out + 16 * i);
    }
  }
}

}  // namespace

PackedDot packed_dot_pair(PackedLayout layout) {
  switch (layout) {
    case PackedLayout::q4_0x8:
      return q4_0x16;
    case PackedLayout::q8_0x8:
      return q8_0x16;
    default:  // none, and the K layouts (dot_kquants_packed.hpp)
      break;
  }
  return nullptr;
}

}  // namespace cortiq::kernels::avx512
