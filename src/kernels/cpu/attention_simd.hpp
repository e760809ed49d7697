// The inner loops of attention that are not dot_f32 or a row conversion,
// per SIMD level. The scalar versions define the order of operations; the
// AVX2 ones give the same bits.
#pragma once

#include <cstdint>

namespace cortiq::kernels {

struct AttentionLoops {
  // One cache row against n_q queries (q + u * n, contiguous): out[u *
  // out_stride] = dot_f32(q_u, k, n) * scale, dot_f32's 16 lanes and fold.
  // n a multiple of 16 for SIMD.
  void (*dot_rows)(const float* k, const float* q, int64_t n_q, int64_t n, float scale, float* out,
                   int64_t out_stride);
  // The same for operands that are all fp16 values (an f16 cache, the
  // query and probabilities rounded to f16): every product is then exact in
  // float, so a fused multiply-add rounds exactly as multiply-then-add, and
  // SIMD levels may use FMA — the same bits at half the instructions.
  void (*dot_rows_f16)(const float* k, const float* q, int64_t n_q, int64_t n, float scale,
                       float* out, int64_t out_stride);
  // out[i] = sum over p < n_pos, in order, of a[p] * v_p[i] (multiply, then
  // add, from 0), i < n, where v_p is the n values at base + cells[p] *
  // row_bytes + offset: f32, or f16 (then a[p] must be fp16 values, so FMA
  // is exact). Each output is accumulated over all positions in a register.
  // n a multiple of 8 for SIMD.
  void (*weighted_f32)(const float* a, int64_t n_pos, const std::byte* base, size_t row_bytes,
                       const int32_t* cells, size_t offset, float* out, int64_t n);
  void (*weighted_f16)(const float* a, int64_t n_pos, const std::byte* base, size_t row_bytes,
                       const int32_t* cells, size_t offset, float* out, int64_t n);
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
