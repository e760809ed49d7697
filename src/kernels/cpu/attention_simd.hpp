// The inner loops of attention_row, per SIMD level. The scalar versions
// define the order of operations; the AVX2 ones give the same bits.
#pragma once

#include <cstdint>

namespace cortiq::kernels {

struct AttentionLoops {
  // q . k with q already rounded to f16 (so each product is exact): the 16
  // lanes and fold of dot_f32. n a multiple of 16 for the SIMD versions.
  float (*dot_f16)(const float* q, const uint16_t* k, int64_t n);
  // y[i] += a * x[i] (multiply, then add).
  void (*axpy_f16)(float a, const uint16_t* x, float* y, int64_t n);
  void (*axpy_f32)(float a, const float* x, float* y, int64_t n);
  // s[i] = exp_approx(s[i] - max); returns their sum: each 8 values summed
  // in float as ((s0 + s4) + (s2 + s6)) + ((s1 + s5) + (s3 + s7)) (a short
  // last group padded with zeros), the group sums added in double in order
  // (the peer's ggml_vec_soft_max_f32 on AVX2).
  double (*exp_sum)(float* s, int64_t n, float max);
};

// The loops for this machine's SIMD level.
const AttentionLoops& attention_loops();

namespace scalar {
extern const AttentionLoops kAttentionLoops;
}
namespace avx2 {
extern const AttentionLoops kAttentionLoops;
}

}  // namespace cortiq::kernels
