// The activation quantizers of round_activations (matmul.cpp), keeping the
// codes instead of their dequantized values.
#include "kernels/cpu/q8_activations.hpp"

#include <algorithm>
#include <cmath>

#include "base/cpu_features.hpp"
#include "base/fp16.hpp"
#include "quant/scalar_math.hpp"

namespace cortiq::kernels {

namespace scalar {

void quantize_q8_0(const float* x, Q8Block32* out, int64_t n) {
  for (int64_t b = 0; b < n / 32; ++b, x += 32) {
    Q8Block32& block = out[b];
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
    block.d = fp16_to_fp32(fp32_to_fp16(amax / 127.0f));
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    int32_t sum = 0;
    for (int j = 0; j < 32; ++j) {
      const int q = quant::nearest_int(x[j] * id);
      block.qs[j] = static_cast<int8_t>(q);
      sum += q;
    }
    block.sum = sum;
  }
}

void quantize_q8_k(const float* x, Q8BlockK* out, int64_t n) {
  for (int64_t b = 0; b < n / 256; ++b, x += 256) {
    Q8BlockK& block = out[b];
    float max = 0.0f;
    float amax = 0.0f;
    for (int j = 0; j < 256; ++j) {
      const float ax = std::fabs(x[j]);
      if (ax > amax) {
        amax = ax;
        max = x[j];
      }
    }
    if (amax == 0.0f) {
      block = Q8BlockK{};
      continue;
    }
    const float iscale = -127.0f / max;
    block.d = 1.0f / iscale;
    for (int j = 0; j < 256; ++j) {
      block.qs[j] = static_cast<int8_t>(std::min(127, quant::nearest_int(iscale * x[j])));
    }
    for (int g = 0; g < 16; ++g) {
      int sum = 0;
      for (int j = 0; j < 16; ++j) sum += block.qs[16 * g + j];
      block.bsums[g] = static_cast<int16_t>(sum);
    }
  }
}

}  // namespace scalar

void quantize_q8_0(const float* x, Q8Block32* out, int64_t n) {
#if defined(__x86_64__)
  if (simd_level() >= SimdLevel::avx2) return avx2::quantize_q8_0(x, out, n);
#endif
  scalar::quantize_q8_0(x, out, n);
}

void quantize_q8_k(const float* x, Q8BlockK* out, int64_t n) {
#if defined(__x86_64__)
  if (simd_level() >= SimdLevel::avx2) return avx2::quantize_q8_k(x, out, n);
#endif
  scalar::quantize_q8_k(x, out, n);
}

float q8_1_block_sum(const float* x, int32_t code_sum) {
  float amax = 0.0f;
  for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
  return fp16_to_fp32(fp32_to_fp16(amax / 127.0f * static_cast<float>(code_sum)));
}

}  // namespace cortiq::kernels
