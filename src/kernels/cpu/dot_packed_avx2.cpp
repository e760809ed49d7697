// AVX2 kernels over the packed 8-row groups: the eight rows' products land
// in the eight 32-bit lanes, so each block ends in one convert and one FMA
// per activation row — the order of dot_packed.hpp, lane by lane.
#include <immintrin.h>

#include <cstring>

#include "kernels/cpu/dot_packed.hpp"
#include "kernels/cpu/simd_avx2.hpp"

namespace cortiq::kernels::avx2 {

namespace {

constexpr int64_t kQ4Block = 144;     // packed_block_bytes(q4_0x8)
constexpr int64_t kQ8Block = 272;     // packed_block_bytes(q8_0x8)
constexpr int kCodes = 16;            // offset of the codes after the 8 fp16 scales
constexpr int64_t kMxfp4Block = 136;  // packed_block_bytes(mxfp4x8)
constexpr int kMxfp4Codes = 8;        // after the 8 E8M0 exponents

// Q4_0: nibbles are unsigned 0..15, so maddubs takes them as they are and
// the -8 offset comes off as 8 * a.sum. Pairs of products stay below
// 2 * 15 * 127, so 16 of them fit an int16 lane: a block's products are
// summed in int16 and widened once. This is the decode kernel (one
// activation row, streaming the weights with prefetch).
void q4_0x8_one(const std::byte* group, const Q8Block32* a, int64_t n_blocks, float* out) {
  const __m256i low = _mm256_set1_epi8(0x0F);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < n_blocks; ++b) {
    const std::byte* block = group + b * kQ4Block;
    prefetch_ahead(block, kQ4Block);
    const auto* codes = reinterpret_cast<const __m256i*>(block + kCodes);
    const Q8Block32& ab = a[b];
    __m256i sum = _mm256_setzero_si256();
    for (int k = 0; k < 4; ++k) {
      const __m256i w = _mm256_loadu_si256(codes + k);
      const __m256i lo = _mm256_and_si256(w, low);
      const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(w, 4), low);
      sum = _mm256_add_epi16(sum, _mm256_maddubs_epi16(lo, broadcast4(ab.qs + 4 * k)));
      sum = _mm256_add_epi16(sum, _mm256_maddubs_epi16(hi, broadcast4(ab.qs + 16 + 4 * k)));
    }
    const __m256i isum = _mm256_sub_epi32(_mm256_madd_epi16(sum, _mm256_set1_epi16(1)),
                                          _mm256_set1_epi32(8 * ab.sum));
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum),
                          _mm256_mul_ps(halves8(block), _mm256_set1_ps(ab.d)), acc);
  }
  _mm256_storeu_ps(out, acc);
}

// Q4_0 against many activation rows (prefill): each block's codes are
// unpacked once into registers and meet every row before the next block,
// the rows' accumulators living in `out`. Per row and block this is the
// arithmetic of q4_0x8, in the same order, so the same bits.
void q4_0x8_rows(const std::byte* group, const Q8Block32* a, int64_t a_stride, int n_act,
                 int64_t n_blocks, float* out) {
  const __m256i low = _mm256_set1_epi8(0x0F);
  for (int i = 0; i < n_act; ++i) _mm256_storeu_ps(out + 8 * i, _mm256_setzero_ps());
  for (int64_t b = 0; b < n_blocks; ++b) {
    const std::byte* block = group + b * kQ4Block;
    const auto* codes = reinterpret_cast<const __m256i*>(block + kCodes);
    const __m256i w0 = _mm256_loadu_si256(codes), w1 = _mm256_loadu_si256(codes + 1);
    const __m256i w2 = _mm256_loadu_si256(codes + 2), w3 = _mm256_loadu_si256(codes + 3);
    const __m256i lo0 = _mm256_and_si256(w0, low),
                  hi0 = _mm256_and_si256(_mm256_srli_epi16(w0, 4), low);
    const __m256i lo1 = _mm256_and_si256(w1, low),
                  hi1 = _mm256_and_si256(_mm256_srli_epi16(w1, 4), low);
    const __m256i lo2 = _mm256_and_si256(w2, low),
                  hi2 = _mm256_and_si256(_mm256_srli_epi16(w2, 4), low);
    const __m256i lo3 = _mm256_and_si256(w3, low),
                  hi3 = _mm256_and_si256(_mm256_srli_epi16(w3, 4), low);
    const __m256 d = halves8(block);
    const Q8Block32* ab = a + b;
    for (int i = 0; i < n_act; ++i, ab += a_stride) {
      const int8_t* q = ab->qs;
      __m256i sum = _mm256_maddubs_epi16(lo0, broadcast4(q));
      sum = _mm256_add_epi16(sum, _mm256_maddubs_epi16(hi0, broadcast4(q + 16)));
      sum = _mm256_add_epi16(sum, _mm256_maddubs_epi16(lo1, broadcast4(q + 4)));
      sum = _mm256_add_epi16(sum, _mm256_maddubs_epi16(hi1, broadcast4(q + 20)));
      sum = _mm256_add_epi16(sum, _mm256_maddubs_epi16(lo2, broadcast4(q + 8)));
      sum = _mm256_add_epi16(sum, _mm256_maddubs_epi16(hi2, broadcast4(q + 24)));
      sum = _mm256_add_epi16(sum, _mm256_maddubs_epi16(lo3, broadcast4(q + 12)));
      sum = _mm256_add_epi16(sum, _mm256_maddubs_epi16(hi3, broadcast4(q + 28)));
      const __m256i isum = _mm256_sub_epi32(_mm256_madd_epi16(sum, _mm256_set1_epi16(1)),
                                            _mm256_set1_epi32(8 * ab->sum));
      float* acc = out + 8 * i;
      _mm256_storeu_ps(
          acc, _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(d, _mm256_set1_ps(ab->d)),
                               _mm256_loadu_ps(acc)));
    }
  }
}

// MXFP4: the nibbles through kMxfp4Values + 12 (0..24) are maddubs'
// unsigned operand and 12 * a.sum comes off. Pairs of products reach
// 2 * 24 * 127 = 6096, so an int16 lane takes four (24384): a block's
// products are summed in two int16 halves, each widened once. The same
// exact isum as the scalar kernel's, then its one FMA.
struct Mxfp4Codes {
  __m256i lo[4], hi[4];
  explicit Mxfp4Codes(const std::byte* block) {
    const __m256i low = _mm256_set1_epi8(0x0F);
    const __m256i table = mxfp4_unsigned_table();
    for (int k = 0; k < 4; ++k) {
      const __m256i w = load256(block + kMxfp4Codes + 32 * k);
      lo[k] = _mm256_shuffle_epi8(table, _mm256_and_si256(w, low));
      hi[k] = _mm256_shuffle_epi8(table, _mm256_and_si256(_mm256_srli_epi16(w, 4), low));
    }
  }
  __m256i isum(const Q8Block32& x) const {
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i half[2];
    for (int h = 0; h < 2; ++h) {
      const int k0 = 2 * h, k1 = 2 * h + 1;
      __m256i s = _mm256_maddubs_epi16(lo[k0], broadcast4(x.qs + 4 * k0));
      s = _mm256_add_epi16(s, _mm256_maddubs_epi16(hi[k0], broadcast4(x.qs + 16 + 4 * k0)));
      s = _mm256_add_epi16(s, _mm256_maddubs_epi16(lo[k1], broadcast4(x.qs + 4 * k1)));
      s = _mm256_add_epi16(s, _mm256_maddubs_epi16(hi[k1], broadcast4(x.qs + 16 + 4 * k1)));
      half[h] = _mm256_madd_epi16(s, ones);
    }
    return _mm256_sub_epi32(_mm256_add_epi32(half[0], half[1]), _mm256_set1_epi32(12 * x.sum));
  }
};

// One activation row (decode), streaming the weights with prefetch.
void mxfp4x8_one(const std::byte* group, const Q8Block32* a, int64_t n_blocks, float* out) {
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < n_blocks; ++b) {
    const std::byte* block = group + b * kMxfp4Block;
    prefetch_ahead(block, kMxfp4Block);
    const Mxfp4Codes codes(block);
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(codes.isum(a[b])),
                          _mm256_mul_ps(e8m0_halves8(block), _mm256_set1_ps(a[b].d)), acc);
  }
  _mm256_storeu_ps(out, acc);
}

// Many activation rows (prefill): each block unpacked once for all of them.
void mxfp4x8_rows(const std::byte* group, const Q8Block32* a, int64_t a_stride, int n_act,
                  int64_t n_blocks, float* out) {
  for (int i = 0; i < n_act; ++i) _mm256_storeu_ps(out + 8 * i, _mm256_setzero_ps());
  for (int64_t b = 0; b < n_blocks; ++b) {
    const std::byte* block = group + b * kMxfp4Block;
    const Mxfp4Codes codes(block);
    const __m256 d = e8m0_halves8(block);
    const Q8Block32* ab = a + b;
    for (int i = 0; i < n_act; ++i, ab += a_stride) {
      float* acc = out + 8 * i;
      _mm256_storeu_ps(
          acc, _mm256_fmadd_ps(_mm256_cvtepi32_ps(codes.isum(*ab)),
                               _mm256_mul_ps(d, _mm256_set1_ps(ab->d)), _mm256_loadu_ps(acc)));
    }
  }
}

void mxfp4_group(const std::byte* group, const Q8Block32* a, int64_t a_stride, int n_act,
                 int64_t n_blocks, float* out) {
  if (n_act == 1) return mxfp4x8_one(group, a, n_blocks, out);
  mxfp4x8_rows(group, a, a_stride, n_act, n_blocks, out);
}

// Q8_0: signed times signed, so the weight's sign moves onto the
// activation (maddubs needs one unsigned side). A pair of products can
// reach 2 * 128 * 127, so each chunk widens to int32 at once.
template <int N>
void q8_0x8(const std::byte* group, const Q8Block32* a, int64_t a_stride, int64_t n_blocks,
            float* out) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[N];
  for (int i = 0; i < N; ++i) acc[i] = _mm256_setzero_ps();
  for (int64_t b = 0; b < n_blocks; ++b) {
    const std::byte* block = group + b * kQ8Block;
    if (N == 1) prefetch_ahead(block, kQ8Block);
    __m256i sums[N];
    for (int i = 0; i < N; ++i) sums[i] = _mm256_setzero_si256();
    for (int k = 0; k < 8; ++k) {
      const __m256i w =
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + kCodes + 32 * k));
      const __m256i magnitude = _mm256_sign_epi8(w, w);
      for (int i = 0; i < N; ++i) {
        const __m256i q = _mm256_sign_epi8(broadcast4(a[i * a_stride + b].qs + 4 * k), w);
        sums[i] =
            _mm256_add_epi32(sums[i], _mm256_madd_epi16(_mm256_maddubs_epi16(magnitude, q), ones));
      }
    }
    const __m256 d = halves8(block);
    for (int i = 0; i < N; ++i) {
      const Q8Block32& ab = a[i * a_stride + b];
      acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums[i]), _mm256_mul_ps(d, _mm256_set1_ps(ab.d)),
                               acc[i]);
    }
  }
  for (int i = 0; i < N; ++i) _mm256_storeu_ps(out + 8 * i, acc[i]);
}

void q4_0_group(const std::byte* group, const Q8Block32* a, int64_t a_stride, int n_act,
                int64_t n_blocks, float* out) {
  if (n_act == 1) return q4_0x8_one(group, a, n_blocks, out);
  q4_0x8_rows(group, a, a_stride, n_act, n_blocks, out);
}

void q8_0_group(const std::byte* group, const Q8Block32* a, int64_t a_stride, int n_act,
                int64_t n_blocks, float* out) {
  switch (n_act) {
    case 1:
      return q8_0x8<1>(group, a, a_stride, n_blocks, out);
    case 2:
      return q8_0x8<2>(group, a, a_stride, n_blocks, out);
    case 3:
      return q8_0x8<3>(group, a, a_stride, n_blocks, out);
    default:
      return q8_0x8<4>(group, a, a_stride, n_blocks, out);
  }
}

}  // namespace

PackedDot packed_dot(PackedLayout layout) {
  switch (layout) {
    case PackedLayout::q4_0x8:
      return q4_0_group;
    case PackedLayout::q8_0x8:
      return q8_0_group;
    case PackedLayout::mxfp4x8:
      return mxfp4_group;
    default:  // none, and the K layouts (dot_kquants_packed.hpp)
      break;
  }
  return nullptr;
}

}  // namespace cortiq::kernels::avx2
