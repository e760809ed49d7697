// One value head's step of the gated delta rule (Gated DeltaNet, the
// recurrent form), over its state S of d rows (value j) of d floats (key i):
//
//   sk_j    = S[j] · k                    (before the decay)
//   delta_j = (v_j - decay * sk_j) * beta
//   S[j][i] = S[j][i] * decay + k[i] * delta_j
//   o_j     = (S[j] · q) * scale          (after the update)
//
// which is llama.cpp's "S *= exp(g); S[j] += k (v_j - S[j]·k) beta;
// o_j = S[j]·q / sqrt(d)" with the decay folded into the first product,
// in two passes over S instead of four. Both dot products put element i
// into lane i % 8 by a fused multiply-add, in order, and fold the lanes as
// ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)); the update is
// fma(k[i], delta_j, S[j][i] * decay). Every SIMD level gives the scalar's
// bits.
//
// delta_rule_step_keyed is Kimi Delta Attention's step: a decay per key
// channel instead of one per head, its operations in the order of
// llama.cpp's fused op (ggml_gated_delta_net with a per-channel gate; the
// dot products there are ggml_vec_dot_f32's, summed in other lanes):
//
//   S[j][i] = S[j][i] * decay[i]
//   delta_j = (v_j - S[j] · k) * beta
//   S[j][i] = fma(k[i], delta_j, S[j][i])
//   o_j     = (S[j] · q) * scale
//
// with the same lanes and fold.
#pragma once

#include <cstdint>

namespace cortiq::kernels {

void delta_rule_step(float* state, const float* q, const float* k, const float* v, float beta,
                     float decay, float scale, float* o, int64_t d);
void delta_rule_step_keyed(float* state, const float* q, const float* k, const float* v, float beta,
                           const float* decay, float scale, float* o, int64_t d);

namespace scalar {
void delta_rule_step(float* state, const float* q, const float* k, const float* v, float beta,
                     float decay, float scale, float* o, int64_t d);
void delta_rule_step_keyed(float* state, const float* q, const float* k, const float* v, float beta,
                           const float* decay, float scale, float* o, int64_t d);
}  // namespace scalar
namespace avx2 {
// d a multiple of 8.
void delta_rule_step(float* state, const float* q, const float* k, const float* v, float beta,
                     float decay, float scale, float* o, int64_t d);
void delta_rule_step_keyed(float* state, const float* q, const float* k, const float* v, float beta,
                           const float* decay, float scale, float* o, int64_t d);
}  // namespace avx2

}  // namespace cortiq::kernels
