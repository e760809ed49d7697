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
// accumulators living in `out`. One row has its own loop.
#include <immintrin.h>

#include "kernels/cpu/dot_packed.hpp"
#include "kernels/cpu/simd_avx512.hpp"

namespace cortiq::kernels::avx512 {

namespace {

constexpr int64_t kQ8Block = 272;  // packed_block_bytes(q8_0x8)
constexpr int kCodes = 16;         // offset of Q8_0's codes after the 8 fp16 scales

// The one-group decode kernel below is a thread's only read stream, and
// asks for its bytes 4 KiB ahead instead of kPrefetchBytes: on the 2-core
// AVX-512 EPYC, Q4_0 decode from memory (BM_MatmulDecodeFromMemory) read
// 36-47 GB/s against 34-41 at 1 KiB, in alternating runs, and Phi-3-mini's
// decode went from 14.3-14.9 to 16.6-18.5 tokens/s. The two-stream K-quant
// kernels measured no better, or slightly worse, that far ahead, and
// Q8_0's runs were mixed: they keep kPrefetchBytes.
constexpr int64_t kOneStreamPrefetchBytes = 4096;

void zero_rows(int n_act, float* out) {
  for (int i = 0; i < n_act; ++i) _mm512_storeu_ps(out + 16 * i, _mm512_setzero_ps());
}

// acc (16 outputs of one activation row, in out) += float(isum) * (d * a.d).
void fold_block(__m512i isum, __m512 d, float a_d, float* acc) {
  _mm512_storeu_ps(acc,
                   _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(d, _mm512_set1_ps(a_d)),
                                   _mm512_loadu_ps(acc)));
}

// One activation row against a pair (a prefill's odd last row; a decode
// takes one group at a time, matmul_integer.cpp): the accumulator stays in
// a register (a store and reload per block would chain every block's FMA
// through memory), and both groups' streams are prefetched.
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

// The two 4-bit layouts run the same kernels: a block's nibbles become
// vpdpbusd's unsigned operand (Q4_0's as they are, MXFP4's through
// kMxfp4Values + 12), and the codes' offset (8, 12) comes off as offset *
// a.sum (exact integers, so where it enters does not matter).
struct Q4_0Nibbles {
  static constexpr int64_t kBlock = 144;  // packed_block_bytes(q4_0x8)
  static constexpr int kCodes = 16;       // after the 8 fp16 scales
  static constexpr int32_t kOffset = 8;
  static constexpr PackedLayout kLayout = PackedLayout::q4_0x8;
  static __m512i operand(__m512i nibbles) { return nibbles; }
  static __m256 scales(const std::byte* block) { return avx2::halves8(block); }
  static __m512 scales_pair(const std::byte* b0, const std::byte* b1) {
    return halves_pair8(b0, b1);
  }
};

struct Mxfp4Nibbles {
  static constexpr int64_t kBlock = 136;  // packed_block_bytes(mxfp4x8)
  static constexpr int kCodes = 8;        // after the 8 E8M0 exponents
  static constexpr int32_t kOffset = 12;
  static constexpr PackedLayout kLayout = PackedLayout::mxfp4x8;
  static __m512i operand(__m512i nibbles) {
    const __m512i table =
        _mm512_broadcast_i32x4(_mm256_castsi256_si128(avx2::mxfp4_unsigned_table()));
    return _mm512_shuffle_epi8(table, nibbles);
  }
  static __m256 scales(const std::byte* block) { return avx2::e8m0_halves8(block); }
  static __m512 scales_pair(const std::byte* b0, const std::byte* b1) {
    return e8m0_halves_pair8(b0, b1);
  }
};

// One block of a pair of groups against one activation row. Two dependency
// chains (low and high nibbles) halve the wait on vpdpbusd's latency.
template <class Nibbles>
void nibble_block_sums(const std::byte* b0, const std::byte* b1, const Q8Block32& x,
                       __m512i& isum) {
  const __m512i low = _mm512_set1_epi8(0x0F);
  __m512i s_lo = _mm512_set1_epi32(-Nibbles::kOffset * x.sum);
  __m512i s_hi = _mm512_setzero_si512();
  for (int k = 0; k < 4; ++k) {
    const int at = Nibbles::kCodes + 32 * k;
    const __m512i w = load_pair256(b0 + at, b1 + at);
    s_lo = _mm512_dpbusd_epi32(s_lo, Nibbles::operand(_mm512_and_si512(w, low)),
                               broadcast4(x.qs + 4 * k));
    s_hi =
        _mm512_dpbusd_epi32(s_hi, Nibbles::operand(_mm512_and_si512(_mm512_srli_epi16(w, 4), low)),
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
template <class Nibbles>
void nibbles_x8_one(const std::byte* group, const Q8Block32* a, int64_t n_blocks, float* out) {
  const __m512i low = _mm512_set1_epi8(0x0F);
  // Lanes 0-7 take activation dword j, lanes 8-15 dword j + 1.
  const auto pick = [](int j) {
    return _mm512_set_epi32(j + 1, j + 1, j + 1, j + 1, j + 1, j + 1, j + 1, j + 1, j, j, j, j, j,
                            j, j, j);
  };
  const __m512i low01 = pick(0), low23 = pick(2), high01 = pick(4), high23 = pick(6);
  const auto lo = [&](__m512i w) { return Nibbles::operand(_mm512_and_si512(w, low)); };
  const auto hi = [&](__m512i w) {
    return Nibbles::operand(_mm512_and_si512(_mm512_srli_epi16(w, 4), low));
  };
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < n_blocks; ++b) {
    const std::byte* block = group + b * Nibbles::kBlock;
    prefetch_ahead(block, Nibbles::kBlock, kOneStreamPrefetchBytes);
    const Q8Block32& x = a[b];
    const __m512i q = _mm512_castsi256_si512(load256(x.qs));
    const __m512i w01 = _mm512_loadu_si512(block + Nibbles::kCodes);
    const __m512i w23 = _mm512_loadu_si512(block + Nibbles::kCodes + 64);
    __m512i s_lo =
        _mm512_dpbusd_epi32(_mm512_setzero_si512(), lo(w01), _mm512_permutexvar_epi32(low01, q));
    __m512i s_hi =
        _mm512_dpbusd_epi32(_mm512_setzero_si512(), hi(w01), _mm512_permutexvar_epi32(high01, q));
    s_lo = _mm512_dpbusd_epi32(s_lo, lo(w23), _mm512_permutexvar_epi32(low23, q));
    s_hi = _mm512_dpbusd_epi32(s_hi, hi(w23), _mm512_permutexvar_epi32(high23, q));
    const __m512i s = _mm512_add_epi32(s_lo, s_hi);
    const __m256i isum = _mm256_sub_epi32(
        _mm256_add_epi32(_mm512_castsi512_si256(s), _mm512_extracti64x4_epi64(s, 1)),
        _mm256_set1_epi32(Nibbles::kOffset * x.sum));
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum),
                          _mm256_mul_ps(Nibbles::scales(block), _mm256_set1_ps(x.d)), acc);
  }
  _mm256_storeu_ps(out, acc);
}

// One group: the kernel above for one activation row, the AVX2 kernel
// (which unpacks each block once for all the rows) for several.
template <class Nibbles>
void nibbles_x8(const std::byte* group, const Q8Block32* a, int64_t a_stride, int n_act,
                int64_t n_blocks, float* out) {
  if (n_act == 1) return nibbles_x8_one<Nibbles>(group, a, n_blocks, out);
  avx2::packed_dot(Nibbles::kLayout)(group, a, a_stride, n_act, n_blocks, out);
}

template <class Nibbles>
void nibbles_x16(const std::byte* group, const Q8Block32* a, int64_t a_stride, int n_act,
                 int64_t n_blocks, float* out) {
  constexpr int64_t kBlock = Nibbles::kBlock;
  if (n_act == 1) {
    return one_row<nibble_block_sums<Nibbles>, kBlock, Nibbles::scales_pair>(group, a, n_blocks,
                                                                             out);
  }
  const std::byte* second = group + n_blocks * kBlock;
  const __m512i low = _mm512_set1_epi8(0x0F);
  zero_rows(n_act, out);
  for (int64_t b = 0; b < n_blocks; ++b) {
    const std::byte* b0 = group + b * kBlock;
    const std::byte* b1 = second + b * kBlock;
    __m512i lo[4];
    __m512i hi[4];
    for (int k = 0; k < 4; ++k) {
      const int at = Nibbles::kCodes + 32 * k;
      const __m512i w = load_pair256(b0 + at, b1 + at);
      lo[k] = Nibbles::operand(_mm512_and_si512(w, low));
      hi[k] = Nibbles::operand(_mm512_and_si512(_mm512_srli_epi16(w, 4), low));
    }
    const __m512 d = Nibbles::scales_pair(b0, b1);
    const Q8Block32* ab = a + b;
    for (int i = 0; i < n_act; ++i, ab += a_stride) {
      const int8_t* q = ab->qs;
      __m512i s_lo = _mm512_set1_epi32(-Nibbles::kOffset * ab->sum);
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
      return nibbles_x8<Q4_0Nibbles>;
    case PackedLayout::mxfp4x8:
      return nibbles_x8<Mxfp4Nibbles>;
    default:
      return avx2::packed_dot(layout);
  }
}

PackedDot packed_dot_pair(PackedLayout layout) {
  switch (layout) {
    case PackedLayout::q4_0x8:
      return nibbles_x16<Q4_0Nibbles>;
    case PackedLayout::q8_0x8:
      return q8_0x16;
    case PackedLayout::mxfp4x8:
      return nibbles_x16<Mxfp4Nibbles>;
    default:  // none, and the K layouts (dot_kquants_packed.hpp)
      break;
  }
  return nullptr;
}

}  // namespace cortiq::kernels::avx512
