// Attention's score tiles and value sums on AVX-512, each the scalar loop's
// bits (attention_simd.hpp): a key tile's 16 positions are exactly one
// 512-bit register, so a query's scores are one accumulator; a value row's
// outputs take 16 per register, and with 32 registers four heads keep a
// 64-wide head's outputs in registers for one pass over the positions
// (AVX2 needs four passes). Every lane holds one chain of the scalar order:
// multiply then add, fused only for fp16 operands (exact products). The key
// transposes and the softmax are the AVX2 loops.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "kernels/cpu/attention_simd.hpp"

namespace cortiq::kernels::avx512 {

namespace {

static_assert(kKeyTile == 16, "a key tile is one 512-bit register");

template <bool kFused>
__m512 mul_add(__m512 a, __m512 b, __m512 acc) {
  if constexpr (kFused) return _mm512_fmadd_ps(a, b, acc);
  return _mm512_add_ps(acc, _mm512_mul_ps(a, b));
}

template <bool kFused>
__m256 mul_add8(__m256 a, __m256 b, __m256 acc) {
  if constexpr (kFused) return _mm256_fmadd_ps(a, b, acc);
  return _mm256_add_ps(acc, _mm256_mul_ps(a, b));
}

template <typename Element>
__m512 load16(const Element* p) {
  if constexpr (std::is_same_v<Element, uint16_t>) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  } else {
    return _mm512_loadu_ps(p);
  }
}

template <typename Element>
__m256 load8(const Element* p) {
  if constexpr (std::is_same_v<Element, uint16_t>) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  } else {
    return _mm256_loadu_ps(p);
  }
}

// U queries x 16 positions: U accumulators, one chain over d each.
template <bool kFused, int U>
void score_block(const float* kt, const float* q, int64_t dim, float scale, float* out,
                 int64_t out_stride) {
  __m512 acc[U];
  for (int u = 0; u < U; ++u) acc[u] = _mm512_setzero_ps();
  for (int64_t d = 0; d < dim; ++d) {
    const __m512 k = _mm512_loadu_ps(kt + d * kKeyTile);
    for (int u = 0; u < U; ++u) acc[u] = mul_add<kFused>(_mm512_set1_ps(q[u * dim + d]), k, acc[u]);
  }
  const __m512 s = _mm512_set1_ps(scale);
  for (int u = 0; u < U; ++u) _mm512_storeu_ps(out + u * out_stride, _mm512_mul_ps(acc[u], s));
}

template <bool kFused>
void score_tile(const float* kt, const float* q, int64_t n_q, int64_t dim, float scale, float* out,
                int64_t out_stride) {
  int64_t u = 0;
  for (; u + 8 <= n_q; u += 8) {
    score_block<kFused, 8>(kt, q + u * dim, dim, scale, out + u * out_stride, out_stride);
  }
  for (; u + 4 <= n_q; u += 4) {
    score_block<kFused, 4>(kt, q + u * dim, dim, scale, out + u * out_stride, out_stride);
  }
  for (; u < n_q; ++u) {
    score_block<kFused, 1>(kt, q + u * dim, dim, scale, out + u * out_stride, out_stride);
  }
}

// Value rows are prefetched this many positions ahead (see prefetch_rows
// in attention.cpp).
constexpr int64_t kValuesAhead = 16;

// U heads x R registers of 16 outputs [i0, i0 + 16R), over positions
// [p0, p1): each output's chain continues from out (or starts at 0).
template <typename Element, int U, int R>
void weighted_block(const float* const* a, float* const* out, const HeadRows& rows, int64_t p0,
                    int64_t p1, int64_t i0, bool zero) {
  constexpr bool kFused = std::is_same_v<Element, uint16_t>;  // fp16 x fp16 is exact
  __m512 acc[U][R];
  for (int u = 0; u < U; ++u) {
    for (int r = 0; r < R; ++r) {
      acc[u][r] = zero ? _mm512_setzero_ps() : _mm512_loadu_ps(out[u] + i0 + 16 * r);
    }
  }
  for (int64_t p = p0; p < p1; ++p) {
    if (p + kValuesAhead < p1) {
      const auto* ahead =
          reinterpret_cast<const char*>(head_row<Element>(rows, p + kValuesAhead) + i0);
      for (size_t at = 0; at < R * 16 * sizeof(Element); at += 64) {
        _mm_prefetch(ahead + at, _MM_HINT_T0);
      }
    }
    const Element* v = head_row<Element>(rows, p) + i0;
    __m512 x[R];
    for (int r = 0; r < R; ++r) x[r] = load16(v + 16 * r);
    for (int u = 0; u < U; ++u) {
      const __m512 w = _mm512_set1_ps(a[u][p]);
      for (int r = 0; r < R; ++r) acc[u][r] = mul_add<kFused>(w, x[r], acc[u][r]);
    }
  }
  for (int u = 0; u < U; ++u) {
    for (int r = 0; r < R; ++r) _mm512_storeu_ps(out[u] + i0 + 16 * r, acc[u][r]);
  }
}

// The last 8 outputs of a head size that is 8 more than a multiple of 16.
template <typename Element, int U>
void weighted_block8(const float* const* a, float* const* out, const HeadRows& rows, int64_t p0,
                     int64_t p1, int64_t i0, bool zero) {
  constexpr bool kFused = std::is_same_v<Element, uint16_t>;
  __m256 acc[U];
  for (int u = 0; u < U; ++u) acc[u] = zero ? _mm256_setzero_ps() : _mm256_loadu_ps(out[u] + i0);
  for (int64_t p = p0; p < p1; ++p) {
    const __m256 x = load8(head_row<Element>(rows, p) + i0);
    for (int u = 0; u < U; ++u) acc[u] = mul_add8<kFused>(_mm256_set1_ps(a[u][p]), x, acc[u]);
  }
  for (int u = 0; u < U; ++u) _mm256_storeu_ps(out[u] + i0, acc[u]);
}

// Positions [p0, p1) for U heads over all n outputs (n a multiple of 8):
// blocks of R registers per head (at most 16 accumulators), then single
// registers, then 8 lanes.
template <typename Element, int U>
void weighted_span(const float* const* a, float* const* out, const HeadRows& rows, int64_t p0,
                   int64_t p1, int64_t n, bool zero) {
  constexpr int R = U <= 2 ? 8 : 4;
  int64_t i = 0;
  for (; i + 16 * R <= n; i += 16 * R) weighted_block<Element, U, R>(a, out, rows, p0, p1, i, zero);
  for (; i + 16 <= n; i += 16) weighted_block<Element, U, 1>(a, out, rows, p0, p1, i, zero);
  if (i < n) weighted_block8<Element, U>(a, out, rows, p0, p1, i, zero);
}

template <typename Element>
void weighted_span_of(int units, const float* const* sa, float* const* so, const HeadRows& rows,
                      int64_t p0, int64_t p1, int64_t n, bool zero) {
  switch (units) {
    case 4:
      return weighted_span<Element, 4>(sa, so, rows, p0, p1, n, zero);
    case 3:
      return weighted_span<Element, 3>(sa, so, rows, p0, p1, n, zero);
    case 2:
      return weighted_span<Element, 2>(sa, so, rows, p0, p1, n, zero);
    default:
      return weighted_span<Element, 1>(sa, so, rows, p0, p1, n, zero);
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

}  // namespace

// Constant-initialized (no code of this object runs before the CPU is
// checked); the key transposes and the softmax are left to the AVX2 loops
// (attention_loops_of fills them in).
const AttentionLoops kAttentionLoops{nullptr,
                                     nullptr,
                                     score_tile<false>,
                                     score_tile<true>,
                                     weighted_range<float>,
                                     weighted_range<uint16_t>,
                                     weighted<float>,
                                     weighted<uint16_t>,
                                     nullptr,
                                     nullptr};

}  // namespace cortiq::kernels::avx512
