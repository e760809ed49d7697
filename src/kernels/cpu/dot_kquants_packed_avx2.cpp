// AVX2 kernels over the packed K groups (q4_Kx8, q6_Kx8): the eight rows'
// integer parts land in the eight 32-bit lanes, and each super-block ends in
// the float operations of dot_kquants.cpp done lane by lane (_mm256 mul and
// fused multiply-add: per lane the same correctly rounded operations as the
// scalar code), so the results are the per-row kernels' bits.
//
// Prefill: each weight chunk is decoded once and used for every activation
// row of the call, whose only live state is an int16 running sum and an
// int32 super-block sum; the float accumulators live in `out`. Decode
// (one row) prefetches ahead, as dot_packed_avx2.cpp does.
//
// Nothing here may be a weak symbol (tools/check-simd-objects.sh): helpers
// are in an anonymous namespace and no inline function of a shared header is
// called.
#include <immintrin.h>

#include <cstring>

#include "kernels/cpu/dot_kquants_packed.hpp"
#include "kernels/cpu/simd_avx2.hpp"

namespace cortiq::kernels::avx2 {

namespace {

// pshufb controls that put byte 4 * (lane % 4) + s of each 32-bit lane's
// 128-bit half into the lane's two int16 halves, zero-extended: the lane's
// byte s as an int16 pair.
__m256i byte_pair_control(int s) {
  const auto word = static_cast<int16_t>(s | 0x8000);  // byte s, then zero
  const __m128i lane =
      _mm_add_epi16(_mm_set1_epi16(word), _mm_setr_epi16(0, 0, 4, 4, 8, 8, 12, 12));
  return _mm256_setr_m128i(lane, lane);
}

// As byte_pair_control, but bytes s and s + 1: the lane's two adjacent
// fields as an int16 pair.
__m256i byte_two_control(int s) {
  const auto w0 = static_cast<int16_t>(s | 0x8000);
  const auto w1 = static_cast<int16_t>((s + 1) | 0x8000);
  const __m128i lane = _mm_add_epi16(_mm_setr_epi16(w0, w1, w0, w1, w0, w1, w0, w1),
                                     _mm_setr_epi16(0, 0, 4, 4, 8, 8, 12, 12));
  return _mm256_setr_m128i(lane, lane);
}

// ---- q4_Kx8 ----------------------------------------------------------------
//
// Block: d[8] at 0, dmin[8] at 16, the 12 scale bytes of each row at 32
// (4 at a time: lane r of the vector at 32 + 32 k holds bytes 4k..4k+3 of
// row r), codes at 128: chunk 8c + k holds bytes 32c + 4k .. +3 of each
// row, whose low nibbles are elements 64c + 4k.. of sub-block 2c and high
// nibbles elements 64c + 32 + 4k.. of sub-block 2c + 1.
//
// Ranges: a maddubs pair is at most 2 * 15 * 127 = 3810, so a sub-block's 8
// chunks sum to at most 30480 in int16; madd by the 6-bit scale pair then
// widens (2 * 30480 * 63 < 2^31). Mins: madd of (m_2t, m_2t+1) with
// (B_2t, B_2t+1), B_j = bsums[2j] + bsums[2j + 1], |B_j| <= 32 * 127.
constexpr int64_t kQ4KBlock = 1152;  // packed_block_bytes(q4_Kx8)

struct Q4KScales {
  __m256i scale[8];  // lane r: (sc_rj, sc_rj) as int16
  __m256i min[4];    // lane r: (m_r,2t, m_r,2t+1) as int16
};

void q4_k_scales(const std::byte* block, Q4KScales& s) {
  const __m256i low6 = _mm256_set1_epi8(0x3F);
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  const __m256i top2 = _mm256_set1_epi8(0x30);
  const __m256i p0 = load256(block + 32);
  const __m256i p1 = load256(block + 64);
  const __m256i p2 = load256(block + 96);
  // Lane r: the bytes of scales (mins) 0..3 and 4..7 of row r (k_scales.hpp).
  const __m256i sc_lo = _mm256_and_si256(p0, low6);
  const __m256i sc_hi =
      _mm256_or_si256(_mm256_and_si256(p2, low4), _mm256_and_si256(_mm256_srli_epi16(p0, 2), top2));
  const __m256i m_lo = _mm256_and_si256(p1, low6);
  const __m256i m_hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(p2, 4), low4),
                                       _mm256_and_si256(_mm256_srli_epi16(p1, 2), top2));
  for (int j = 0; j < 4; ++j) {
    s.scale[j] = _mm256_shuffle_epi8(sc_lo, byte_pair_control(j));
    s.scale[j + 4] = _mm256_shuffle_epi8(sc_hi, byte_pair_control(j));
  }
  s.min[0] = _mm256_shuffle_epi8(m_lo, byte_two_control(0));
  s.min[1] = _mm256_shuffle_epi8(m_lo, byte_two_control(2));
  s.min[2] = _mm256_shuffle_epi8(m_hi, byte_two_control(0));
  s.min[3] = _mm256_shuffle_epi8(m_hi, byte_two_control(2));
}

// The accumulators live in `out` (one load, FMA and store per super-block
// and activation row), which frees registers for the integer sums.
template <int N>
void zero_out(float* out) {
  for (int i = 0; i < N; ++i) _mm256_storeu_ps(out + 8 * i, _mm256_setzero_ps());
}

// imin of one row: lane r = sum_j m_rj * (bsums[2j] + bsums[2j + 1]).
__m256i q4_k_mins(const Q4KScales& s, const Q8BlockK& x) {
  const __m256i b_pairs = _mm256_broadcastsi128_si256(
      _mm_hadd_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x.bsums)),
                     _mm_loadu_si128(reinterpret_cast<const __m128i*>(x.bsums + 8))));
  __m256i imin = _mm256_madd_epi16(s.min[0], _mm256_shuffle_epi32(b_pairs, 0x00));
  imin = _mm256_add_epi32(imin, _mm256_madd_epi16(s.min[1], _mm256_shuffle_epi32(b_pairs, 0x55)));
  imin = _mm256_add_epi32(imin, _mm256_madd_epi16(s.min[2], _mm256_shuffle_epi32(b_pairs, 0xAA)));
  return _mm256_add_epi32(imin, _mm256_madd_epi16(s.min[3], _mm256_shuffle_epi32(b_pairs, 0xFF)));
}

// The two fused steps of dot_kquants.cpp, lane by lane.
__m256 q4_k_fold(const std::byte* block, float ad_scalar, __m256i isum, __m256i imin, __m256 acc) {
  const __m256 ad = _mm256_set1_ps(ad_scalar);
  const __m256 dl = _mm256_mul_ps(ad, halves8(block));
  const __m256 ml = _mm256_mul_ps(ad, halves8(block + 16));
  acc = _mm256_fmadd_ps(dl, _mm256_cvtepi32_ps(isum), acc);
  // fma(-ml, imin, acc): negating a factor is exact.
  return _mm256_fnmadd_ps(ml, _mm256_cvtepi32_ps(imin), acc);
}

// The integer parts of one super-block against one activation row.
void q4_k_sums(const std::byte* block, const Q4KScales& s, const Q8BlockK& x, __m256i& isum,
               __m256i& imin) {
  const __m256i low = _mm256_set1_epi8(0x0F);
  const std::byte* codes = block + 128;
  isum = _mm256_setzero_si256();
  for (int c = 0; c < 4; ++c) {
    __m256i sum_lo = _mm256_setzero_si256();
    __m256i sum_hi = _mm256_setzero_si256();
    for (int k = 0; k < 8; ++k) {
      const __m256i w = load256(codes + 32 * (8 * c + k));
      const __m256i lo = _mm256_and_si256(w, low);
      const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(w, 4), low);
      sum_lo =
          _mm256_add_epi16(sum_lo, _mm256_maddubs_epi16(lo, broadcast4(x.qs + 64 * c + 4 * k)));
      sum_hi = _mm256_add_epi16(sum_hi,
                                _mm256_maddubs_epi16(hi, broadcast4(x.qs + 64 * c + 32 + 4 * k)));
    }
    isum = _mm256_add_epi32(isum, _mm256_madd_epi16(sum_lo, s.scale[2 * c]));
    isum = _mm256_add_epi32(isum, _mm256_madd_epi16(sum_hi, s.scale[2 * c + 1]));
  }
  imin = q4_k_mins(s, x);
}

// One activation row (decode): both nibbles of a chunk from one load.
void q4_kx8_single(const std::byte* group, const Q8BlockK* a, int64_t /*a_stride*/,
                   int64_t n_blocks, float* out) {
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < n_blocks; ++b) {
    const std::byte* block = group + b * kQ4KBlock;
    prefetch_ahead(block, kQ4KBlock);
    Q4KScales s;
    q4_k_scales(block, s);
    __m256i isum;
    __m256i imin;
    q4_k_sums(block, s, a[b], isum, imin);
    acc = q4_k_fold(block, a[b].d, isum, imin, acc);
  }
  _mm256_storeu_ps(out, acc);
}

template <int N>
void q4_kx8(const std::byte* group, const Q8BlockK* a, int64_t a_stride, int64_t n_blocks,
            float* out) {
  static_assert(N >= 2, "one row: q4_kx8_single");
  const __m256i low = _mm256_set1_epi8(0x0F);
  zero_out<N>(out);
  for (int64_t b = 0; b < n_blocks; ++b) {
    const std::byte* block = group + b * kQ4KBlock;
    Q4KScales s;
    q4_k_scales(block, s);
    const std::byte* codes = block + 128;
    const int8_t* q[N];
    for (int i = 0; i < N; ++i) q[i] = a[i * a_stride + b].qs;
    // Sub-block by sub-block: each chunk's nibbles are taken out once and
    // serve every activation row, whose int16 sums are the only per-row
    // state besides isum.
    __m256i isum[N];
    for (int i = 0; i < N; ++i) isum[i] = _mm256_setzero_si256();
    for (int j = 0; j < 8; ++j) {
      const int c = j / 2;
      __m256i sum[N];
      for (int i = 0; i < N; ++i) sum[i] = _mm256_setzero_si256();
      for (int k = 0; k < 8; ++k) {
        const __m256i w = load256(codes + 32 * (8 * c + k));
        const __m256i nib =
            j % 2 == 0 ? _mm256_and_si256(w, low) : _mm256_and_si256(_mm256_srli_epi16(w, 4), low);
        for (int i = 0; i < N; ++i) {
          const __m256i x = broadcast4(q[i] + 32 * j + 4 * k);
          sum[i] = _mm256_add_epi16(sum[i], _mm256_maddubs_epi16(nib, x));
          // An empty asm keeps each sum a running sum: GCC otherwise
          // reassociates the adds, computes a sub-block's products first and
          // spills them (q4_Kx8 prefill 175 -> 225 GFLOP/s with it).
          asm("" : "+x"(sum[i]));
        }
      }
      for (int i = 0; i < N; ++i) {
        isum[i] = _mm256_add_epi32(isum[i], _mm256_madd_epi16(sum[i], s.scale[j]));
      }
    }
    for (int i = 0; i < N; ++i) {
      const Q8BlockK& x = a[i * a_stride + b];
      const __m256 acc =
          q4_k_fold(block, x.d, isum[i], q4_k_mins(s, x), _mm256_loadu_ps(out + 8 * i));
      _mm256_storeu_ps(out + 8 * i, acc);
    }
  }
}

// ---- q6_Kx8 ----------------------------------------------------------------
//
// Block: d[8] at 0, the 16 int8 group scales of each row at 16 (2 at a
// time: lane r of the 16 bytes at 16 + 16 t holds scales 2t, 2t + 1 of row
// r), ql at 144 and qh at 1168, 4 bytes at a time. For half h and chunk
// m (elements l = 4m .. 4m + 3 of each 32), ql chunk 16h + m gives the low
// nibbles of k = 0 (low) and 2 (high), chunk 16h + 8 + m those of k = 1 and
// 3, qh chunk 8h + m the top bits of k = 0..3 at bits 2k; element
// 128h + 32k + l, group 8h + 2k + l / 16.
//
// Ranges: codes 0..63, a maddubs pair <= 2 * 63 * 127 = 16002, so two
// chunks sum in int16 (32004) before the madd by the group scale pair
// (2 * 32004 * 128 < 2^31). The offset -32 enters as -32 * sum_g sc_g *
// bsums[g] per row (madd of the scale pairs with the bsums pairs).
constexpr int64_t kQ6KBlock = 1680;  // packed_block_bytes(q6_Kx8)

struct Q6KScales {
  __m256i scale[16];  // lane r: (sc_rg, sc_rg) as int16
  __m256i pair[8];    // lane r: (sc_r,2t, sc_r,2t+1) as int16
};

void q6_k_scales(const std::byte* block, Q6KScales& s) {
  // pshufb controls: each 32-bit lane's word 0 (1) twice.
  const __m128i lanes = _mm_setr_epi8(0, 0, 0, 0, 4, 4, 4, 4, 8, 8, 8, 8, 12, 12, 12, 12);
  const __m128i lo = _mm_add_epi8(lanes, _mm_set1_epi32(0x01000100));
  const __m128i hi = _mm_add_epi8(lanes, _mm_set1_epi32(0x03020302));
  const __m256i dup_lo = _mm256_setr_m128i(lo, lo);
  const __m256i dup_hi = _mm256_setr_m128i(hi, hi);
  for (int t = 0; t < 8; ++t) {
    s.pair[t] = _mm256_cvtepi8_epi16(load128(block + 16 + 16 * t));
    s.scale[2 * t] = _mm256_shuffle_epi8(s.pair[t], dup_lo);
    s.scale[2 * t + 1] = _mm256_shuffle_epi8(s.pair[t], dup_hi);
  }
}

// Code vector k of chunk m of half h: 4 codes of each of the 8 rows.
__m256i q6_codes(const std::byte* ql, const std::byte* qh, int h, int k, int m) {
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  const __m256i m30 = _mm256_set1_epi8(0x30);
  const __m256i l = load256(ql + 32 * (16 * h + 8 * (k % 2) + m));
  const __m256i hb = load256(qh + 32 * (8 * h + m));
  const __m256i low =
      k < 2 ? _mm256_and_si256(l, m4) : _mm256_and_si256(_mm256_srli_epi16(l, 4), m4);
  const __m256i high = k == 0   ? _mm256_slli_epi16(hb, 4)
                       : k == 1 ? _mm256_slli_epi16(hb, 2)
                       : k == 2 ? hb
                                : _mm256_srli_epi16(hb, 2);
  return _mm256_or_si256(low, _mm256_and_si256(high, m30));
}

// One activation row (decode): the four code vectors of a chunk come from
// one load each of its ql and qh bytes.
void q6_kx8_single(const std::byte* group, const Q8BlockK* a, int64_t /*a_stride*/,
                   int64_t n_blocks, float* out) {
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  const __m256i m30 = _mm256_set1_epi8(0x30);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < n_blocks; ++b) {
    const std::byte* block = group + b * kQ6KBlock;
    prefetch_ahead(block, kQ6KBlock);
    Q6KScales s;
    q6_k_scales(block, s);
    const std::byte* ql = block + 144;
    const std::byte* qh = block + 1168;
    const Q8BlockK& x = a[b];
    __m256i isum = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {
      for (int m = 0; m < 8; m += 2) {
        __m256i sum[4];
        for (int k = 0; k < 4; ++k) sum[k] = _mm256_setzero_si256();
        for (int mm = m; mm < m + 2; ++mm) {
          const __m256i ql0 = load256(ql + 32 * (16 * h + mm));
          const __m256i ql1 = load256(ql + 32 * (16 * h + 8 + mm));
          const __m256i hb = load256(qh + 32 * (8 * h + mm));
          const __m256i codes[4] = {
              _mm256_or_si256(_mm256_and_si256(ql0, m4),
                              _mm256_and_si256(_mm256_slli_epi16(hb, 4), m30)),
              _mm256_or_si256(_mm256_and_si256(ql1, m4),
                              _mm256_and_si256(_mm256_slli_epi16(hb, 2), m30)),
              _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4),
                              _mm256_and_si256(hb, m30)),
              _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4),
                              _mm256_and_si256(_mm256_srli_epi16(hb, 2), m30)),
          };
          for (int k = 0; k < 4; ++k) {
            sum[k] = _mm256_add_epi16(
                sum[k],
                _mm256_maddubs_epi16(codes[k], broadcast4(x.qs + 128 * h + 32 * k + 4 * mm)));
          }
        }
        for (int k = 0; k < 4; ++k) {
          isum = _mm256_add_epi32(isum, _mm256_madd_epi16(sum[k], s.scale[8 * h + 2 * k + m / 4]));
        }
      }
    }
    __m256i offset = _mm256_setzero_si256();
    for (int t = 0; t < 8; ++t) {
      int32_t bs;
      std::memcpy(&bs, x.bsums + 2 * t, sizeof(bs));
      offset = _mm256_add_epi32(offset, _mm256_madd_epi16(s.pair[t], _mm256_set1_epi32(bs)));
    }
    const __m256i total = _mm256_sub_epi32(isum, _mm256_slli_epi32(offset, 5));
    const __m256 dl = _mm256_mul_ps(_mm256_set1_ps(x.d), halves8(block));
    acc = _mm256_fmadd_ps(dl, _mm256_cvtepi32_ps(total), acc);
  }
  _mm256_storeu_ps(out, acc);
}

template <int N>
void q6_kx8(const std::byte* group, const Q8BlockK* a, int64_t a_stride, int64_t n_blocks,
            float* out) {
  static_assert(N >= 2, "one row: q6_kx8_single");
  zero_out<N>(out);
  for (int64_t b = 0; b < n_blocks; ++b) {
    const std::byte* block = group + b * kQ6KBlock;
    Q6KScales s;
    q6_k_scales(block, s);
    const std::byte* ql = block + 144;
    const std::byte* qh = block + 1168;
    const int8_t* q[N];
    for (int i = 0; i < N; ++i) q[i] = a[i * a_stride + b].qs;
    // Two chunks of one group at a time: their codes are built once and
    // serve every activation row.
    __m256i isum[N];
    for (int i = 0; i < N; ++i) isum[i] = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {
      for (int k = 0; k < 4; ++k) {
        for (int m = 0; m < 8; m += 2) {
          const __m256i c0 = q6_codes(ql, qh, h, k, m);
          const __m256i c1 = q6_codes(ql, qh, h, k, m + 1);
          const __m256i& scale = s.scale[8 * h + 2 * k + m / 4];
          for (int i = 0; i < N; ++i) {
            const int8_t* x = q[i] + 128 * h + 32 * k + 4 * m;
            const __m256i sum = _mm256_add_epi16(_mm256_maddubs_epi16(c0, broadcast4(x)),
                                                 _mm256_maddubs_epi16(c1, broadcast4(x + 4)));
            isum[i] = _mm256_add_epi32(isum[i], _mm256_madd_epi16(sum, scale));
            asm("" : "+x"(isum[i]));  // a running sum (see q4_kx8)
          }
        }
      }
    }
    const __m256 d = halves8(block);
    for (int i = 0; i < N; ++i) {
      const Q8BlockK& x = a[i * a_stride + b];
      __m256i offset = _mm256_setzero_si256();
      for (int t = 0; t < 8; ++t) {
        int32_t bs;
        std::memcpy(&bs, x.bsums + 2 * t, sizeof(bs));
        offset = _mm256_add_epi32(offset, _mm256_madd_epi16(s.pair[t], _mm256_set1_epi32(bs)));
      }
      const __m256i total = _mm256_sub_epi32(isum[i], _mm256_slli_epi32(offset, 5));
      const __m256 dl = _mm256_mul_ps(_mm256_set1_ps(x.d), d);
      _mm256_storeu_ps(out + 8 * i, _mm256_fmadd_ps(dl, _mm256_cvtepi32_ps(total),
                                                    _mm256_loadu_ps(out + 8 * i)));
    }
  }
}

// n_act -> the kernel instance for that many rows.
template <void (*K1)(const std::byte*, const Q8BlockK*, int64_t, int64_t, float*),
          void (*K2)(const std::byte*, const Q8BlockK*, int64_t, int64_t, float*),
          void (*K3)(const std::byte*, const Q8BlockK*, int64_t, int64_t, float*),
          void (*K4)(const std::byte*, const Q8BlockK*, int64_t, int64_t, float*)>
void dispatch(const std::byte* group, const Q8BlockK* a, int64_t a_stride, int n_act,
              int64_t n_blocks, float* out) {
  switch (n_act) {
    case 1:
      return K1(group, a, a_stride, n_blocks, out);
    case 2:
      return K2(group, a, a_stride, n_blocks, out);
    case 3:
      return K3(group, a, a_stride, n_blocks, out);
    default:
      return K4(group, a, a_stride, n_blocks, out);
  }
}

}  // namespace

PackedKDot packed_kquant_dot(PackedLayout layout) {
  switch (layout) {
    case PackedLayout::q4_Kx8:
      return dispatch<q4_kx8_single, q4_kx8<2>, q4_kx8<3>, q4_kx8<4>>;
    case PackedLayout::q6_Kx8:
      return dispatch<q6_kx8_single, q6_kx8<2>, q6_kx8<3>, q6_kx8<4>>;
    default:
      return nullptr;
  }
}

}  // namespace cortiq::kernels::avx2
