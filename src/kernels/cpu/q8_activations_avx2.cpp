// The activation quantizers on AVX2, the scalar's codes and scales bit for
// bit: max |x| is order-free, the scale goes through F16C's round-to-
// nearest-even fp16 (as fp32_to_fp16), and cvtps rounds half to even under
// the default rounding mode, as nearest_int does for these magnitudes.
#include <immintrin.h>

#include "kernels/cpu/q8_activations.hpp"

namespace cortiq::kernels::avx2 {

namespace {

__m256 abs8(__m256 v) {
  return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v);
}

float hmax8(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

float fp16_round(float x) {
  return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtps_ph(_mm_set_ss(x), _MM_FROUND_TO_NEAREST_INT)));
}

// Four registers of int32 codes -> 32 int8 in element order.
__m256i pack_codes(__m256i q0, __m256i q1, __m256i q2, __m256i q3) {
  const __m256i w01 = _mm256_packs_epi32(q0, q1);  // lanes interleaved by 128-bit half
  const __m256i w23 = _mm256_packs_epi32(q2, q3);
  const __m256i b = _mm256_packs_epi16(w01, w23);
  return _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

int32_t hsum_epi32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}

}  // namespace

void quantize_q8_0(const float* x, Q8Block32* out, int64_t n) {
  for (int64_t b = 0; b < n / 32; ++b, x += 32) {
    const __m256 v0 = _mm256_loadu_ps(x), v1 = _mm256_loadu_ps(x + 8);
    const __m256 v2 = _mm256_loadu_ps(x + 16), v3 = _mm256_loadu_ps(x + 24);
    const float amax =
        hmax8(_mm256_max_ps(_mm256_max_ps(abs8(v0), abs8(v1)), _mm256_max_ps(abs8(v2), abs8(v3))));
    Q8Block32& block = out[b];
    block.d = fp16_round(amax / 127.0f);
    const __m256 id = _mm256_set1_ps(amax != 0.0f ? 127.0f / amax : 0.0f);
    const __m256i q0 = _mm256_cvtps_epi32(_mm256_mul_ps(v0, id));
    const __m256i q1 = _mm256_cvtps_epi32(_mm256_mul_ps(v1, id));
    const __m256i q2 = _mm256_cvtps_epi32(_mm256_mul_ps(v2, id));
    const __m256i q3 = _mm256_cvtps_epi32(_mm256_mul_ps(v3, id));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(block.qs), pack_codes(q0, q1, q2, q3));
    block.sum = hsum_epi32(_mm256_add_epi32(_mm256_add_epi32(q0, q1), _mm256_add_epi32(q2, q3)));
  }
}

void quantize_q8_k(const float* x, Q8BlockK* out, int64_t n) {
  for (int64_t b = 0; b < n / 256; ++b, x += 256) {
    Q8BlockK& block = out[b];
    __m256 m = _mm256_setzero_ps();
    for (int j = 0; j < 256; j += 8) m = _mm256_max_ps(m, abs8(_mm256_loadu_ps(x + j)));
    const float amax = hmax8(m);
    if (amax == 0.0f) {
      block = Q8BlockK{};
      continue;
    }
    // The signed value of the first element of largest magnitude.
    float max = 0.0f;
    for (int j = 0;; ++j) {
      if ((x[j] < 0 ? -x[j] : x[j]) == amax) {
        max = x[j];
        break;
      }
    }
    const float iscale = -127.0f / max;
    block.d = 1.0f / iscale;
    const __m256 scale = _mm256_set1_ps(iscale);
    const __m256i top = _mm256_set1_epi32(127);
    for (int j = 0; j < 256; j += 32) {
      __m256i q[4];
      for (int k = 0; k < 4; ++k) {
        q[k] = _mm256_min_epi32(
            top, _mm256_cvtps_epi32(_mm256_mul_ps(scale, _mm256_loadu_ps(x + j + 8 * k))));
      }
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(block.qs + j),
                          pack_codes(q[0], q[1], q[2], q[3]));
      // bsums of elements j..j+15 and j+16..j+31.
      block.bsums[j / 16] = static_cast<int16_t>(hsum_epi32(_mm256_add_epi32(q[0], q[1])));
      block.bsums[j / 16 + 1] = static_cast<int16_t>(hsum_epi32(_mm256_add_epi32(q[2], q[3])));
    }
  }
}

}  // namespace cortiq::kernels::avx2
