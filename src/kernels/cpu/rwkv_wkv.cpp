#include "kernels/cpu/rwkv_wkv.hpp"

#include <array>
#include <cmath>
#include <cstddef>

#include "base/cpu_features.hpp"

namespace cortiq::kernels {

namespace scalar {

namespace {

constexpr size_t kLanes = 64;

// llama.cpp's fold of four 16-float accumulators x[0..3] (lane = 16 kk + l):
// x0 += x2, x1 += x3, x0 += x1, then the halving tree of
// _mm512_reduce_add_ps: 8 + 8, 4 + 4, (q0 + q2) + (q1 + q3).
float fold(std::array<float, kLanes>& x) {
  for (size_t l = 0; l < 16; ++l) {
    x[l] += x[32 + l];
    x[16 + l] += x[48 + l];
  }
  for (size_t l = 0; l < 16; ++l) x[l] += x[16 + l];
  for (size_t l = 0; l < 8; ++l) x[l] += x[8 + l];
  for (size_t l = 0; l < 4; ++l) x[l] += x[4 + l];
  return (x[0] + x[2]) + (x[1] + x[3]);
}

}  // namespace

void wkv6_step(float* state, const float* r, const float* k, const float* v, const float* u,
               const float* w, float* out, int64_t d) {
  const auto n = static_cast<size_t>(d);
  for (size_t j = 0; j < n; ++j) out[j] = 0.0f;
  for (size_t i = 0; i < n; ++i) {
    float* row = state + i * n;
    for (size_t j = 0; j < n; ++j) {
      const float kv = v[j] * k[i];
      out[j] = std::fma(std::fma(kv, u[i], row[j]), r[i], out[j]);
      row[j] = std::fma(row[j], w[i], kv);
    }
  }
}

void wkv7_step(float* state, const float* r, const float* w, const float* k, const float* v,
               const float* a, const float* b, float* out, int64_t d) {
  const auto n = static_cast<size_t>(d);
  std::array<float, kLanes> lanes;
  for (size_t i = 0; i < n; ++i) {
    float* row = state + i * n;
    lanes.fill(0.0f);
    for (size_t j = 0; j < n; ++j) lanes[j % kLanes] = std::fma(a[j], row[j], lanes[j % kLanes]);
    const float sa = fold(lanes);
    lanes.fill(0.0f);
    for (size_t j = 0; j < n; ++j) {
      row[j] = std::fma(sa, b[j], std::fma(row[j], w[j], v[i] * k[j]));
      lanes[j % kLanes] = std::fma(row[j], r[j], lanes[j % kLanes]);
    }
    out[i] = fold(lanes);
  }
}

}  // namespace scalar

void wkv6_step(float* state, const float* r, const float* k, const float* v, const float* u,
               const float* w, float* out, int64_t d) {
#if defined(__x86_64__)
  if (d % 8 == 0 && simd_level() >= SimdLevel::avx2) {
    avx2::wkv6_step(state, r, k, v, u, w, out, d);
    return;
  }
#endif
  scalar::wkv6_step(state, r, k, v, u, w, out, d);
}

void wkv7_step(float* state, const float* r, const float* w, const float* k, const float* v,
               const float* a, const float* b, float* out, int64_t d) {
#if defined(__x86_64__)
  if (d % 8 == 0 && simd_level() >= SimdLevel::avx2) {
    avx2::wkv7_step(state, r, w, k, v, a, b, out, d);
    return;
  }
#endif
  scalar::wkv7_step(state, r, w, k, v, a, b, out, d);
}

}  // namespace cortiq::kernels
