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

constexpr int64_t kQ4Block = 144;     // packed_block_bytes(q4_0x8)
constexpr int64_t kQ8Block = 272;     // packed_block_bytes(q8_0x8)
constexpr int kCodes = 16;            // offset of the codes after the 8 fp16 scales
constexpr int64_t kMxfp4Block = 136;  // packed_block_bytes(mxfp4x8)
constexpr int kMxfp4Codes = 8;        // after the 8 E8M0 exponents

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
          int64_t kBlockBytes, __m512 (*Scales)(const std::byte*, const std::byte*) = halves_pair8>
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
                          _mm512_mul_ps(Scales(b0, b1), _mm512_set1_ps(a[b].d)), acc);
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

// One group against one activation row (decode): the AVX2 kernel's single
// read stream, at half its instructions per byte. A register holds two of
// the block's 32-byte code chunks (chunk k's eight rows in lanes 0-7, chunk
// k+1's in lanes 8-15), each half meeting its own four activation codes
// (one vpermd of the block's 32 codes); the halves' exact int32 sums are
// added at the end of the block, so the block's isum is the AVX2 kernel's.
void q4_0x8_one(const std::byte* group, const Q8Block32* a, int64_t n_blocks, float* out) {
  const __m512i low = _mm512_set1_epi8(0x0F);
  // Lanes 0-7 take activation dword j, lanes 8-15 dword j + 1.
  const auto pick = [](int j) {
    return _mm512_set_epi32(j + 1, j + 1, j + 1, j + 1, j + 1, j + 1, j + 1, j + 1, j, j, j, j, j,
                            j, j, j);
  };
  const __m512i low01 = pick(0), low23 = pick(2), high01 = pick(4), high23 = pick(6);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < n_blocks; ++b) {
    const std::byte* block = group + b * kQ4Block;
    prefetch_ahead(block, kQ4Block);
    const Q8Block32& x = a[b];
    const __m512i q = _mm512_castsi256_si512(load256(x.qs));
    const __m512i w01 = _mm512_loadu_si512(block + kCodes);
    const __m512i w23 = _mm512_loadu_si512(block + kCodes + 64);
    __m512i s_lo = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_and_si512(w01, low),
                                       _mm512_permutexvar_epi32(low01, q));
    __m512i s_hi = _mm512_dpbusd_epi32(_mm512_setzero_si512(),
                                       _mm512_and_si512(_mm512_srli_epi16(w01, 4), low),
                                       _mm512_permutexvar_epi32(high01, q));
    s_lo =
        _mm512_dpbusd_epi32(s_lo, _mm512_and_si512(w23, low), _mm512_permutexvar_epi32(low23, q));
    s_hi = _mm512_dpbusd_epi32(s_hi, _mm512_and_si512(_mm512_srli_epi16(w23, 4), low),
                               _mm512_permutexvar_epi32(high23, q));
    const __m512i s = _mm512_add_epi32(s_lo, s_hi);
    const __m256i isum = _mm256_sub_epi32(
        _mm256_add_epi32(_mm512_castsi512_si256(s), _mm512_extracti64x4_epi64(s, 1)),
        _mm256_set1_epi32(8 * x.sum));
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum),
                          _mm256_mul_ps(avx2::halves8(block), _mm256_set1_ps(x.d)), acc);
  }
  _mm256_storeu_ps(out, acc);
}

// One group: the kernel above for one activation row, the AVX2 kernel
// (which unpacks each block once for all the rows) for several.
void q4_0x8(const std::byte* group, const Q8Block32* a, int64_t a_stride, int n_act,
            int64_t n_blocks, float* out) {
  if (n_act == 1) return q4_0x8_one(group, a, n_blocks, out);
  avx2::packed_dot(PackedLayout::q4_0x8)(group, a, a_stride, n_act, n_blocks, out);
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

// MXFP4: as Q4_0, the nibbles through kMxfp4Values + 12 (0..24) being the
// unsigned operand and -12 * a.sum the accumulator's start.
__m512i mxfp4_table() {
  return _mm512_broadcast_i32x4(_mm256_castsi256_si128(avx2::mxfp4_unsigned_table()));
}

void mxfp4_block_sums(const std::byte* b0, const std::byte* b1, const Q8Block32& x, __m512i& isum) {
  const __m512i low = _mm512_set1_epi8(0x0F);
  const __m512i table = mxfp4_table();
  __m512i s_lo = _mm512_set1_epi32(-12 * x.sum);
  __m512i s_hi = _mm512_setzero_si512();
  for (int k = 0; k < 4; ++k) {
    const __m512i w = load_pair256(b0 + kMxfp4Codes + 32 * k, b1 + kMxfp4Codes + 32 * k);
    s_lo = _mm512_dpbusd_epi32(s_lo, _mm512_shuffle_epi8(table, _mm512_and_si512(w, low)),
                               broadcast4(x.qs + 4 * k));
    s_hi = _mm512_dpbusd_epi32(
        s_hi, _mm512_shuffle_epi8(table, _mm512_and_si512(_mm512_srli_epi16(w, 4), low)),
        broadcast4(x.qs + 16 + 4 * k));
  }
  isum = _mm512_add_epi32(s_lo, s_hi);
}

// One group against one activation row: q4_0x8_one's two code chunks per
// register, the nibbles through the table.
void mxfp4x8_one(const std::byte* group, const Q8Block32* a, int64_t n_blocks, float* out) {
  const __m512i low = _mm512_set1_epi8(0x0F);
  const __m512i table = mxfp4_table();
  const auto pick = [](int j) {
    return _mm512_set_epi32(j + 1, j + 1, j + 1, j + 1, j + 1, j + 1, j + 1, j + 1, j, j, j, j, j,
                            j, j, j);
  };
  const __m512i low01 = pick(0), low23 = pick(2), high01 = pick(4), high23 = pick(6);
  const auto lookup = [&](__m512i nibbles) { return _mm512_shuffle_epi8(table, nibbles); };
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < n_blocks; ++b) {
    const std::byte* block = group + b * kMxfp4Block;
    prefetch_ahead(block, kMxfp4Block);
    const Q8Block32& x = a[b];
    const __m512i q = _mm512_castsi256_si512(load256(x.qs));
    const __m512i w01 = _mm512_loadu_si512(block + kMxfp4Codes);
    const __m512i w23 = _mm512_loadu_si512(block + kMxfp4Codes + 64);
    __m512i s_lo = _mm512_dpbusd_epi32(_mm512_setzero_si512(), lookup(_mm512_and_si512(w01, low)),
                                       _mm512_permutexvar_epi32(low01, q));
    __m512i s_hi = _mm512_dpbusd_epi32(_mm512_setzero_si512(),
                                       lookup(_mm512_and_si512(_mm512_srli_epi16(w01, 4), low)),
                                       _mm512_permutexvar_epi32(high01, q));
    s_lo = _mm512_dpbusd_epi32(s_lo, lookup(_mm512_and_si512(w23, low)),
                               _mm512_permutexvar_epi32(low23, q));
    s_hi = _mm512_dpbusd_epi32(s_hi, lookup(_mm512_and_si512(_mm512_srli_epi16(w23, 4), low)),
                               _mm512_permutexvar_epi32(high23, q));
    const __m512i s = _mm512_add_epi32(s_lo, s_hi);
    const __m256i isum = _mm256_sub_epi32(
        _mm256_add_epi32(_mm512_castsi512_si256(s), _mm512_extracti64x4_epi64(s, 1)),
        _mm256_set1_epi32(12 * x.sum));
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum),
                          _mm256_mul_ps(avx2::e8m0_halves8(block), _mm256_set1_ps(x.d)), acc);
  }
  _mm256_storeu_ps(out, acc);
}

void mxfp4x8(const std::byte* group, const Q8Block32* a, int64_t a_stride, int n_act,
             int64_t n_blocks, float* out) {
  if (n_act == 1) return mxfp4x8_one(group, a, n_blocks, out);
  avx2::packed_dot(PackedLayout::mxfp4x8)(group, a, a_stride, n_act, n_blocks, out);
}

void mxfp4x16(const std::byte* group, const Q8Block32* a, int64_t a_stride, int n_act,
              int64_t n_blocks, float* out) {
  if (n_act == 1) {
    return one_row<mxfp4_block_sums, kMxfp4Block, e8m0_halves_pair8>(group, a, n_blocks, out);
  }
  const std::byte* second = group + n_blocks * kMxfp4Block;
  const __m512i low = _mm512_set1_epi8(0x0F);
  const __m512i table = mxfp4_table();
  zero_rows(n_act, out);
  for (int64_t b = 0; b < n_blocks; ++b) {
    const std::byte* b0 = group + b * kMxfp4Block;
    const std::byte* b1 = second + b * kMxfp4Block;
    __m512i lo[4];
    __m512i hi[4];
    for (int k = 0; k < 4; ++k) {
      const __m512i w = load_pair256(b0 + kMxfp4Codes + 32 * k, b1 + kMxfp4Codes + 32 * k);
      lo[k] = _mm512_shuffle_epi8(table, _mm512_and_si512(w, low));
      hi[k] = _mm512_shuffle_epi8(table, _mm512_and_si512(_mm512_srli_epi16(w, 4), low));
    }
    const __m512 d = e8m0_halves_pair8(b0, b1);
    const Q8Block32* ab = a + b;
    for (int i = 0; i < n_act; ++i, ab += a_stride) {
      const int8_t* q = ab->qs;
      __m512i s_lo = _mm512_set1_epi32(-12 * ab->sum);
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

PackedDot packed_dot(PackedLayout layout) {
  switch (layout) {
    case PackedLayout::q4_0x8:
      return q4_0x8;
    case PackedLayout::mxfp4x8:
      return mxfp4x8;
    default:
      return avx2::packed_dot(layout);
  }
}

PackedDot packed_dot_pair(PackedLayout layout) {
  switch (layout) {
    case PackedLayout::q4_0x8:
      return q4_0x16;
    case PackedLayout::q8_0x8:
      return q8_0x16;
    case PackedLayout::mxfp4x8:
      return mxfp4x16;
    default:  // none, and the K layouts (dot_kquants_packed.hpp)
      break;
  }
  return nullptr;
}

}  // namespace cortiq::kernels::avx512
