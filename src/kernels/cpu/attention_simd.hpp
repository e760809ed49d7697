// The inner loops of attention that are not dot_f32 or a row conversion,
// per SIMD level. The scalar versions define the order of operations; the
// AVX2 ones give the same bits.
#pragma once

#include <cstdint>

namespace cortiq::kernels {

struct AttentionLoops {
  // y[i] += a * x[i] (multiply, then add). n a multiple of 8 for SIMD.
  void (*axpy_f32)(float a, const float* x, float* y, int64_t n);
  // One cache row against n_q queries (q + u * n, contiguous): out[u *
  // out_stride] = dot_f32(q_u, k, n) * scale, dot_f32's 16 lanes and fold.
  // n a multiple of 16 for SIMD.
  void (*dot_rows)(const float* k, const float* q, int64_t n_q, int64_t n, float scale, float* out,
                   int64_t out_stride);
  // One value row into n_q outputs: y_u[i] += a[u * a_stride] * v[i] for
  // y_u = y + u * y_stride (multiply, then add). n a multiple of 8 for SIMD.
  void (*axpy_rows)(const float* v, const float* a, int64_t a_stride, int64_t n_q, float* y,
                    int64_t y_stride, int64_t n);
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
