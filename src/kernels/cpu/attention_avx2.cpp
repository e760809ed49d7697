// Attention's inner loops on AVX2, each the scalar loop's bits:
// multiply-then-add, exp_approx lane by lane, the peer's group sums.
#include <immintrin.h>

#include <cstddef>
#include <type_traits>

#include "kernels/cpu/attention_simd.hpp"
#include "kernels/cpu/dot_lanes_avx2.hpp"
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

template <bool kFused>
void dot_rows(const float* k, const float* q, int64_t n_q, int64_t n, float scale, float* out,
              int64_t out_stride) {
  for (int64_t u = 0; u < n_q; ++u, q += n) {
    DotLanes lanes;  // dot_f32's 16 lanes and fold
    for (int64_t i = 0; i < n; i += 16) {
      lanes.lo = mul_add<kFused>(_mm256_loadu_ps(q + i), _mm256_loadu_ps(k + i), lanes.lo);
      lanes.hi = mul_add<kFused>(_mm256_loadu_ps(q + i + 8), _mm256_loadu_ps(k + i + 8), lanes.hi);
    }
    out[u * out_stride] = lanes.fold() * scale;
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

// 32 outputs at a time in four registers across all positions; f16 values
// meet fp16 probabilities, so their FMA is exact (see attention_simd.hpp).
template <typename Element>
void weighted(const float* a, int64_t n_pos, const std::byte* base, size_t row_bytes,
              const int32_t* cells, size_t offset, float* out, int64_t n) {
  constexpr bool kFused = std::is_same_v<Element, uint16_t>;
  auto row = [&](int64_t p) {
    return reinterpret_cast<const Element*>(base + static_cast<size_t>(cells[p]) * row_bytes +
                                            offset);
  };
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    __m256 acc2 = _mm256_setzero_ps(), acc3 = _mm256_setzero_ps();
    for (int64_t p = 0; p < n_pos; ++p) {
      const Element* v = row(p) + i;
      const __m256 w = _mm256_set1_ps(a[p]);
      acc0 = mul_add<kFused>(w, load8(v), acc0);
      acc1 = mul_add<kFused>(w, load8(v + 8), acc1);
      acc2 = mul_add<kFused>(w, load8(v + 16), acc2);
      acc3 = mul_add<kFused>(w, load8(v + 24), acc3);
    }
    _mm256_storeu_ps(out + i, acc0);
    _mm256_storeu_ps(out + i + 8, acc1);
    _mm256_storeu_ps(out + i + 16, acc2);
    _mm256_storeu_ps(out + i + 24, acc3);
  }
  for (; i < n; i += 8) {
    __m256 acc = _mm256_setzero_ps();
    for (int64_t p = 0; p < n_pos; ++p)
      acc = mul_add<kFused>(_mm256_set1_ps(a[p]), load8(row(p) + i), acc);
    _mm256_storeu_ps(out + i, acc);
  }
}

// ((v0 + v4) + (v2 + v6)) + ((v1 + v5) + (v3 + v7))
float hsum8(__m256 v) {
  __m128 h = _mm_add_ps(_mm256_extractf128_ps(v, 1), _mm256_castps256_ps128(v));
  h = _mm_add_ps(h, _mm_movehl_ps(h, h));
  h = _mm_add_ss(h, _mm_movehdup_ps(h));
  return _mm_cvtss_f32(h);
}

double exp_sum(float* s, int64_t n, float max) {
  const __m256 vmax = _mm256_set1_ps(max);
  double sum = 0.0;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = exp_approx8(_mm256_sub_ps(_mm256_loadu_ps(s + i), vmax));
    _mm256_storeu_ps(s + i, v);
    sum += static_cast<double>(hsum8(v));
  }
  if (i < n) {
    alignas(32) float tail[8] = {};
    for (int64_t j = 0; i + j < n; ++j) tail[j] = s[i + j];
    // Padding lanes become exactly 0, as the scalar loop's zeros.
    const __m256 valid = _mm256_cmp_ps(_mm256_setr_ps(0, 1, 2, 3, 4, 5, 6, 7),
                                       _mm256_set1_ps(static_cast<float>(n - i)), _CMP_LT_OQ);
    const __m256 v = _mm256_and_ps(valid, exp_approx8(_mm256_sub_ps(_mm256_load_ps(tail), vmax)));
    _mm256_store_ps(tail, v);
    for (int64_t j = 0; i + j < n; ++j) s[i + j] = tail[j];
    sum += static_cast<double>(hsum8(v));
  }
  return sum;
}

}  // namespace

const AttentionLoops kAttentionLoops{dot_rows<false>, dot_rows<true>, weighted<float>,
                                     weighted<uint16_t>, exp_sum};

}  // namespace cortiq::kernels::avx2
