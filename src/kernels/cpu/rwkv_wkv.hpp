// The state updates of RWKV's time mixing, one token of one head, in the
// order of llama.cpp's CPU ops (ggml_rwkv_wkv6, ggml_rwkv_wkv7), so that
// the results are its bits where its own SIMD width does not change them.
//
// wkv6 (RWKV-6 "Finch"): S[i][j], i the key channel, j the value channel;
// u the per-channel bonus ("time_first"), w the decay:
//
//   kv      = v[j] * k[i]
//   out[j] += fma(kv, u[i], S[i][j]) * r[i]   (one fma each, i in order)
//   S[i][j] = fma(S[i][j], w[i], kv)
//
// wkv7 (RWKV-7 "Goose"): S[i][j], i the value channel, j the key channel;
// a and b the in-context learning vectors (llama.cpp passes -kk and kk * a):
//
//   sa      = sum_j a[j] * S[i][j]                      (old state)
//   S[i][j] = fma(sa, b[j], fma(S[i][j], w[j], v[i] * k[j]))
//   out[i]  = sum_j S[i][j] * r[j]                      (new state)
//
// Both sums run in 64 lanes, lane j % 64 an fma chain over j, folded as
// llama.cpp's AVX-512 path folds its four 16-float accumulators
// (GGML_F32_VEC_REDUCE, then _mm512_reduce_add_ps). That path needs a head
// size that is a multiple of 64 (RWKV-7's heads are 64); other sizes use
// the same lanes here.
#pragma once

#include <cstdint>

namespace cortiq::kernels {

// state [d][d], r k w u [d] (key channels), v out [d] (value channels).
void wkv6_step(float* state, const float* r, const float* k, const float* v, const float* u,
               const float* w, float* out, int64_t d);

// state [d][d], r w k a b [d] (key channels), v out [d] (value channels).
void wkv7_step(float* state, const float* r, const float* w, const float* k, const float* v,
               const float* a, const float* b, float* out, int64_t d);

// The definitions, and eight lanes at a time (d a multiple of 8) with the
// same operations: the same bits.
namespace scalar {
void wkv6_step(float* state, const float* r, const float* k, const float* v, const float* u,
               const float* w, float* out, int64_t d);
void wkv7_step(float* state, const float* r, const float* w, const float* k, const float* v,
               const float* a, const float* b, float* out, int64_t d);
}  // namespace scalar
namespace avx2 {
void wkv6_step(float* state, const float* r, const float* k, const float* v, const float* u,
               const float* w, float* out, int64_t d);
void wkv7_step(float* state, const float* r, const float* w, const float* k, const float* v,
               const float* a, const float* b, float* out, int64_t d);
}  // namespace avx2

}  // namespace cortiq::kernels
