#include "kernels/cpu/delta_rule.hpp"

#include <array>
#include <cmath>

#include "base/cpu_features.hpp"

namespace cortiq::kernels {

namespace scalar {

namespace {

float fold(const std::array<float, 8>& l) {
  return ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
}

}  // namespace

void delta_rule_step(float* state, const float* q, const float* k, const float* v, float beta,
                     float decay, float scale, float* o, int64_t d) {
  const auto n = static_cast<size_t>(d);
  for (size_t j = 0; j < n; ++j) {
    float* row = state + j * n;
    std::array<float, 8> lanes{};
    for (size_t i = 0; i < n; ++i) lanes[i % 8] = std::fma(row[i], k[i], lanes[i % 8]);
    const float delta = (v[j] - decay * fold(lanes)) * beta;
    lanes = {};
    for (size_t i = 0; i < n; ++i) {
      const float s = std::fma(k[i], delta, row[i] * decay);
      row[i] = s;
      lanes[i % 8] = std::fma(s, q[i], lanes[i % 8]);
    }
    o[j] = fold(lanes) * scale;
  }
}

void delta_rule_step_keyed(float* state, const float* q, const float* k, const float* v, float beta,
                           const float* decay, float scale, float* o, int64_t d) {
  const auto n = static_cast<size_t>(d);
  for (size_t j = 0; j < n; ++j) {
    float* row = state + j * n;
    std::array<float, 8> lanes{};
    for (size_t i = 0; i < n; ++i) {
      row[i] *= decay[i];
      lanes[i % 8] = std::fma(row[i], k[i], lanes[i % 8]);
    }
    const float delta = (v[j] - fold(lanes)) * beta;
    lanes = {};
    for (size_t i = 0; i < n; ++i) {
      row[i] = std::fma(k[i], delta, row[i]);
      lanes[i % 8] = std::fma(row[i], q[i], lanes[i % 8]);
    }
    o[j] = fold(lanes) * scale;
  }
}

}  // namespace scalar

void delta_rule_step(float* state, const float* q, const float* k, const float* v, float beta,
                     float decay, float scale, float* o, int64_t d) {
#if defined(__x86_64__)
  if (d % 8 == 0 && simd_level() >= SimdLevel::avx2) {
    avx2::delta_rule_step(state, q, k, v, beta, decay, scale, o, d);
    return;
  }
#endif
  scalar::delta_rule_step(state, q, k, v, beta, decay, scale, o, d);
}

void delta_rule_step_keyed(float* state, const float* q, const float* k, const float* v, float beta,
                           const float* decay, float scale, float* o, int64_t d) {
#if defined(__x86_64__)
  if (d % 8 == 0 && simd_level() >= SimdLevel::avx2) {
    avx2::delta_rule_step_keyed(state, q, k, v, beta, decay, scale, o, d);
    return;
  }
#endif
  scalar::delta_rule_step_keyed(state, q, k, v, beta, decay, scale, o, d);
}

}  // namespace cortiq::kernels
