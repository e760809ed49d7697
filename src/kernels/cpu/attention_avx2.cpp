// Attention's inner loops on AVX2, each the scalar loop's bits: register-
// blocked tiles whose lanes each hold one chain of the scalar order
// (multiply-then-add), exp_approx lane by lane, the peer's group sums (a
// window's first group and the last one padded with exact zeros).
#include <immintrin.h>
#include <math.h>  // expf, the C library function ggml calls for a sink

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "kernels/cpu/attention_simd.hpp"
#include "kernels/cpu/exp_approx_avx2.hpp"

namespace cortiq::kernels::avx2 {

namespace {

// kFused: every product is exact (fp16 operands), so an FMA gives the bits
// of multiply-then-add.
template <bool kFused>
__m256 mul_add(__m256 a, __m256 b, __m256 acc) {
  if constexpr (kFused) return _mm256_fmadd_ps(a, b, acc);
  return _mm256_add_ps(acc, _mm256_mul_ps(a, b));
}

template <typename Element>
__m256 load8(const Element* p) {
  if constexpr (std::is_same_v<Element, uint16_t>) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  } else {
    return _mm256_loadu_ps(p);
  }
}

// r[t] = column t of the 8x8 block whose rows are r[0..8).
void transpose8x8(__m256 (&r)[8]) {
  const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
  const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
  const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
  const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
  const __m256 s0 = _mm256_shuffle_ps(t0, t2, 0x44), s1 = _mm256_shuffle_ps(t0, t2, 0xEE);
  const __m256 s2 = _mm256_shuffle_ps(t1, t3, 0x44), s3 = _mm256_shuffle_ps(t1, t3, 0xEE);
  const __m256 s4 = _mm256_shuffle_ps(t4, t6, 0x44), s5 = _mm256_shuffle_ps(t4, t6, 0xEE);
  const __m256 s6 = _mm256_shuffle_ps(t5, t7, 0x44), s7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  r[0] = _mm256_permute2f128_ps(s0, s4, 0x20);
  r[1] = _mm256_permute2f128_ps(s1, s5, 0x20);
  r[2] = _mm256_permute2f128_ps(s2, s6, 0x20);
  r[3] = _mm256_permute2f128_ps(s3, s7, 0x20);
  r[4] = _mm256_permute2f128_ps(s0, s4, 0x31);
  r[5] = _mm256_permute2f128_ps(s1, s5, 0x31);
  r[6] = _mm256_permute2f128_ps(s2, s6, 0x31);
  r[7] = _mm256_permute2f128_ps(s3, s7, 0x31);
}

// 8x8 blocks of (position, dim), converted, transposed and stored.
template <typename Element>
void transpose_keys(const HeadRows& rows, int64_t n, int64_t dim, float* kt) {
  const Element* row[kKeyTile] = {};
  for (int64_t j = 0; j < n; ++j) row[j] = head_row<Element>(rows, j);
  for (int64_t j0 = 0; j0 < kKeyTile; j0 += 8) {
    for (int64_t d0 = 0; d0 < dim; d0 += 8) {
      __m256 r[8];
      for (int t = 0; t < 8; ++t) {
        r[t] = j0 + t < n ? load8(row[j0 + t] + d0) : _mm256_setzero_ps();
      }
      transpose8x8(r);
      for (int t = 0; t < 8; ++t) _mm256_storeu_ps(kt + (d0 + t) * kKeyTile + j0, r[t]);
    }
  }
}

// U queries x 16 positions: 2U accumulators, one chain over d each.
template <bool kFused, int U>
void score_block(const float* kt, const float* q, int64_t dim, float scale, float* out,
                 int64_t out_stride) {
  __m256 lo[U], hi[U];
  for (int u = 0; u < U; ++u) lo[u] = hi[u] = _mm256_setzero_ps();
  for (int64_t d = 0; d < dim; ++d) {
    const __m256 k0 = _mm256_loadu_ps(kt + d * kKeyTile);
    const __m256 k1 = _mm256_loadu_ps(kt + d * kKeyTile + 8);
    for (int u = 0; u < U; ++u) {
      const __m256 w = _mm256_broadcast_ss(q + u * dim + d);
      lo[u] = mul_add<kFused>(w, k0, lo[u]);
      hi[u] = mul_add<kFused>(w, k1, hi[u]);
    }
  }
  const __m256 s = _mm256_set1_ps(scale);
  for (int u = 0; u < U; ++u) {
    _mm256_storeu_ps(out + u * out_stride, _mm256_mul_ps(lo[u], s));
    _mm256_storeu_ps(out + u * out_stride + 8, _mm256_mul_ps(hi[u], s));
  }
}

template <bool kFused>
void score_tile(const float* kt, const float* q, int64_t n_q, int64_t dim, float scale, float* out,
                int64_t out_stride) {
  int64_t u = 0;
  for (; u + 4 <= n_q; u += 4) {
    score_block<kFused, 4>(kt, q + u * dim, dim, scale, out + u * out_stride, out_stride);
  }
  const float* qu = q + u * dim;
  float* ou = out + u * out_stride;
  switch (n_q - u) {
    case 3:
      score_block<kFused, 3>(kt, qu, dim, scale, ou, out_stride);
      break;
    case 2:
      score_block<kFused, 2>(kt, qu, dim, scale, ou, out_stride);
      break;
    case 1:
      score_block<kFused, 1>(kt, qu, dim, scale, ou, out_stride);
      break;
    default:
      break;
  }
}

// Value rows are prefetched this many positions ahead.
constexpr int64_t kValuesAhead = 16;

// U heads x R registers of outputs [i0, i0 + 8R), over positions [p0, p1):
// each output's chain continues from out (or starts at 0 when zero).
template <typename Element, int U, int R>
void weighted_block(const float* const* a, float* const* out, const HeadRows& rows, int64_t p0,
                    int64_t p1, int64_t i0, bool zero) {
  constexpr bool kFused = std::is_same_v<Element, uint16_t>;  // fp16 x fp16 is exact
  __m256 acc[U][R];
  for (int u = 0; u < U; ++u) {
    for (int r = 0; r < R; ++r) {
      acc[u][r] = zero ? _mm256_setzero_ps() : _mm256_loadu_ps(out[u] + i0 + 8 * r);
    }
  }
  for (int64_t p = p0; p < p1; ++p) {
    // The rows a head reads lie a cache row apart (see prefetch_rows in
    // attention.cpp): ask for them a few positions ahead.
    if (p + kValuesAhead < p1) {
      const auto* ahead =
          reinterpret_cast<const char*>(head_row<Element>(rows, p + kValuesAhead) + i0);
      for (size_t at = 0; at < R * 8 * sizeof(Element); at += 64)
        _mm_prefetch(ahead + at, _MM_HINT_T0);
    }
    const Element* v = head_row<Element>(rows, p) + i0;
    __m256 x[R];
    for (int r = 0; r < R; ++r) x[r] = load8(v + 8 * r);
    for (int u = 0; u < U; ++u) {
      const __m256 w = _mm256_broadcast_ss(a[u] + p);
      for (int r = 0; r < R; ++r) acc[u][r] = mul_add<kFused>(w, x[r], acc[u][r]);
    }
  }
  for (int u = 0; u < U; ++u) {
    for (int r = 0; r < R; ++r) _mm256_storeu_ps(out[u] + i0 + 8 * r, acc[u][r]);
  }
}

// Positions [p0, p1) for U heads over all n outputs: as many registers per
// head as keep about 8 accumulators, then single registers for the rest.
template <typename Element, int U>
void weighted_span(const float* const* a, float* const* out, const HeadRows& rows, int64_t p0,
                   int64_t p1, int64_t n, bool zero) {
  constexpr int R = U == 1 ? 8 : U == 2 ? 4 : 2;
  int64_t i = 0;
  for (; i + 8 * R <= n; i += 8 * R) weighted_block<Element, U, R>(a, out, rows, p0, p1, i, zero);
  for (; i < n; i += 8) weighted_block<Element, U, 1>(a, out, rows, p0, p1, i, zero);
}

// U heads over positions [p0, p1), sa/so their probabilities and outputs.
template <typename Element>
void weighted_span_of(int units, const float* const* sa, float* const* so, const HeadRows& rows,
                      int64_t p0, int64_t p1, int64_t n, bool zero) {
  switch (units) {
    case 4:
      weighted_span<Element, 4>(sa, so, rows, p0, p1, n, zero);
      break;
    case 3:
      weighted_span<Element, 3>(sa, so, rows, p0, p1, n, zero);
      break;
    case 2:
      weighted_span<Element, 2>(sa, so, rows, p0, p1, n, zero);
      break;
    default:
      weighted_span<Element, 1>(sa, so, rows, p0, p1, n, zero);
      break;
  }
}

template <typename Element>
void weighted_range(const float* const* a, const int64_t* begin, const int64_t* end, int n_units,
                    const HeadRows& rows, float* const* out, int64_t n) {
  weighted_by_cuts(
      a, begin, end, n_units, out, n,
      [&](int units, const float* const* sa, float* const* so, int64_t p0, int64_t p1, bool zero) {
        weighted_span_of<Element>(units, sa, so, rows, p0, p1, n, zero);
      });
}

template <typename Element>
void weighted(const float* const* a, const int64_t* n_pos, int n_units, const HeadRows& rows,
              float* const* out, int64_t n) {
  const int64_t from_zero[kMaxValueUnits] = {};
  weighted_range<Element>(a, from_zero, n_pos, n_units, rows, out, n);
}

// ((v0 + v4) + (v2 + v6)) + ((v1 + v5) + (v3 + v7))
float hsum8(__m256 v) {
  __m128 h = _mm_add_ps(_mm256_extractf128_ps(v, 1), _mm256_castps256_ps128(v));
  h = _mm_add_ps(h, _mm_movehl_ps(h, h));
  h = _mm_add_ss(h, _mm_movehdup_ps(h));
  return _mm_cvtss_f32(h);
}

// Lanes [lane, lane + count) of one group hold s[0..count); the others
// are exactly 0, as the scalar loop's. Returns the group's sum.
float partial_group(float* s, int64_t lane, int64_t count, __m256 vmax) {
  alignas(32) float group[8] = {};
  for (int64_t j = 0; j < count; ++j) group[lane + j] = s[j];
  const __m256 index = _mm256_setr_ps(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256 valid = _mm256_and_ps(
      _mm256_cmp_ps(index, _mm256_set1_ps(static_cast<float>(lane)), _CMP_GE_OQ),
      _mm256_cmp_ps(index, _mm256_set1_ps(static_cast<float>(lane + count)), _CMP_LT_OQ));
  const __m256 v = _mm256_and_ps(valid, exp_approx8(_mm256_sub_ps(_mm256_load_ps(group), vmax)));
  _mm256_store_ps(group, v);
  for (int64_t j = 0; j < count; ++j) s[j] = group[lane + j];
  return hsum8(v);
}

double exp_sum(float* s, int64_t n, int64_t lead, float max) {
  const __m256 vmax = _mm256_set1_ps(max);
  double sum = 0.0;
  int64_t i = 0;
  if (lead > 0) {
    i = std::min<int64_t>(8 - lead, n);
    sum += static_cast<double>(partial_group(s, lead, i, vmax));
  }
  for (; i + 8 <= n; i += 8) {
    const __m256 v = exp_approx8(_mm256_sub_ps(_mm256_loadu_ps(s + i), vmax));
    _mm256_storeu_ps(s + i, v);
    sum += static_cast<double>(hsum8(v));
  }
  if (i < n) sum += static_cast<double>(partial_group(s + i, 0, n - i, vmax));
  return sum;
}

// max, exp and sum, scale (and f16 rounding): the scalar softmax's bits.
// The maximum is exact in any order (max_ps keeps the running value when
// a score is NaN, as std::max(max, s) does).
void softmax_window(float* s, int64_t n, int64_t lead, const float* sink, bool round_to_f16) {
  __m256 vmax = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) vmax = _mm256_max_ps(_mm256_loadu_ps(s + i), vmax);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, vmax);
  float max = lanes[0];
  for (int j = 1; j < 8; ++j) max = std::max(max, lanes[j]);
  for (; i < n; ++i) max = std::max(max, s[i]);
  if (sink != nullptr) max = max > *sink ? max : *sink;
  double sum = exp_sum(s, n, lead, max);
  if (sink != nullptr) sum += static_cast<double>(::expf(*sink - max));
  const auto inv_sum = static_cast<float>(1.0 / sum);
  const __m256 scale = _mm256_set1_ps(inv_sum);
  i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 p = _mm256_mul_ps(_mm256_loadu_ps(s + i), scale);
    if (round_to_f16) p = _mm256_cvtph_ps(_mm256_cvtps_ph(p, _MM_FROUND_TO_NEAREST_INT));
    _mm256_storeu_ps(s + i, p);
  }
  for (; i < n; ++i) {
    s[i] *= inv_sum;
    if (round_to_f16) {
      const __m128 p = _mm_cvtph_ps(_mm_cvtps_ph(_mm_set_ss(s[i]), _MM_FROUND_TO_NEAREST_INT));
      s[i] = _mm_cvtss_f32(p);
    }
  }
}

void softmax(float* s, int64_t n, bool round_to_f16) {
  softmax_window(s, n, 0, nullptr, round_to_f16);
}

}  // namespace

const AttentionLoops kAttentionLoops{transpose_keys<float>, transpose_keys<uint16_t>,
                                     score_tile<false>,     score_tile<true>,
                                     weighted_range<float>, weighted_range<uint16_t>,
                                     weighted<float>,       weighted<uint16_t>,
                                     softmax_window,        softmax};

}  // namespace cortiq::kernels::avx2
