// Element-wise activations. SiLU uses the vectorizable exp approximation the
// peer's SIMD paths use (ggml's ggml_v_expf: range reduction by a shifter
// constant, a degree-5 polynomial with fused multiply-adds, and explicit
// handling of large |x|), written here in scalar form with std::fma so that
// every SIMD level can reproduce it bit for bit. Its error is ~1.5 ulp; using
// the same function as the peer keeps quantized models, whose 8-bit
// activation rounding amplifies last-bit differences, closest to it.
#include "kernels/cpu/activations.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cassert>
#include <cmath>
#include <cstdint>
#include <memory>

#include "base/cpu_features.hpp"
#include "base/fp16.hpp"

namespace cortiq::kernels {

float exp_approx(float x) {
  const float shifter = 0x1.8p23f;
  const float z = std::fma(x, 0x1.715476p+0f, shifter);  // x / ln 2, rounded to an integer
  const float n = z - shifter;
  const float b = std::fma(-n, 0x1.7f7d1cp-20f, std::fma(-n, 0x1.62e4p-1f, x));  // x - n ln 2
  const uint32_t e = std::bit_cast<uint32_t>(z) << 23;
  const float k = std::bit_cast<float>(e + std::bit_cast<uint32_t>(1.0f));  // 2^n
  const float u = b * b;
  const float j = std::fma(std::fma(std::fma(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u,
                                    std::fma(0x1.555e66p-3f, b, 0x1.fffdb6p-2f)),
                           u, 0x1.ffffecp-1f * b);  // e^b - 1
  if (!(std::fabs(n) > 126.0f)) return std::fma(j, k, k);
  // 2^n overflows the exponent field: scale in two steps, saturating to 0 / inf.
  const uint32_t g = n <= 0.0f ? 0x82000000u : 0u;
  const float s1 = std::bit_cast<float>(g + 0x7f000000u);
  const float s2 = std::bit_cast<float>(e - g);
  if (std::fabs(n) > 192.0f) return s1 * s1;
  return std::fma(s2, j, s2) * s1;
}

float silu(float x) {
  return x / (1.0f + exp_approx(0.0f - x));
}

void swiglu(std::span<const float> gate, std::span<const float> up, std::span<float> out) {
  assert(gate.size() == up.size() && out.size() == gate.size());
  size_t done = 0;
#if defined(__x86_64__)
  if (simd_level() >= SimdLevel::avx2)
    done = avx2::swiglu(gate.data(), up.data(), out.data(), out.size());
#endif
  // Element i is read before it is written, so out may alias either input.
  for (size_t i = done; i < out.size(); ++i) out[i] = silu(gate[i]) * up[i];
}

void silu_inplace(std::span<float> x) {
  size_t done = 0;
#if defined(__x86_64__)
  if (simd_level() >= SimdLevel::avx2) done = avx2::silu_inplace(x.data(), x.size());
#endif
  for (size_t i = done; i < x.size(); ++i) x[i] = silu(x[i]);
}

namespace {

// ggml_gelu_f32: the tanh approximation in float.
float gelu_tanh_exact(float x) {
  constexpr float kCoefA = 0.044715f;
  constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f;
  return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * x * (1.0f + kCoefA * x * x)));
}

// The fp16 table, built once (128 KiB).
const std::array<uint16_t, 65536>& gelu_table() {
  static const auto table = [] {
    auto t = std::make_unique<std::array<uint16_t, 65536>>();
    for (uint32_t i = 0; i < 65536; ++i) {
      (*t)[i] = fp32_to_fp16(gelu_tanh_exact(fp16_to_fp32(static_cast<uint16_t>(i))));
    }
    return t;
  }();
  return *table;
}

}  // namespace

std::span<const uint16_t, 65536> gelu_fp16_table() {
  return gelu_table();
}

float gelu_tanh(float x) {
  if (x <= -10.0f) return 0.0f;
  if (x >= 10.0f) return x;
  return fp16_to_fp32(gelu_table()[fp32_to_fp16(x)]);
}

void gelu_inplace(std::span<float> x) {
  for (float& v : x) v = gelu_tanh(v);
}

void geglu(std::span<const float> gate, std::span<const float> up, std::span<float> out) {
  assert(gate.size() == up.size() && out.size() == gate.size());
  const auto& table = gelu_table();
  for (size_t i = 0; i < out.size(); ++i) {
    const float x = gate[i];
    // As ggml_vec_geglu_f32: the x >= 10 branch multiplies x itself.
    const float g = x <= -10.0f ? 0.0f : x >= 10.0f ? x : fp16_to_fp32(table[fp32_to_fp16(x)]);
    out[i] = x <= -10.0f ? 0.0f : g * up[i];
  }
}

void swiglu_oai(std::span<const float> gate, std::span<const float> up, std::span<float> out,
                float alpha, float limit) {
  assert(gate.size() == up.size() && out.size() == gate.size());
  for (size_t i = 0; i < out.size(); ++i) {
    const float g = std::min(gate[i], limit);
    const float u = std::clamp(up[i], -limit, limit);
    const float glu = g / (1.0f + std::exp(alpha * (-g)));
    out[i] = glu * (u + 1.0f);
  }
}

void relu_sqr_inplace(std::span<float> x) {
  for (float& v : x) {
    const float r = v > 0.0f ? v : 0.0f;
    v = r * r;
  }
}

void softplus_inplace(std::span<float> x) {
  for (float& v : x) v = softplus(v);
}

XieluParams xielu_params(float raw_alpha_n, float raw_alpha_p, float beta, float eps) {
  return {.alpha_n = beta + softplus(raw_alpha_n),
          .alpha_p = softplus(raw_alpha_p),
          .beta = beta,
          .eps = eps};
}

void xielu_inplace(std::span<float> x, const XieluParams& p) {
  for (float& v : x) {
    if (v > 0.0f) {
      v = p.alpha_p * v * v + p.beta * v;
    } else {
      v = (std::expm1(std::min(v, p.eps)) - v) * p.alpha_n + p.beta * v;
    }
  }
}

void add_inplace(std::span<float> x, std::span<const float> b) {
  assert(x.size() == b.size());
  for (size_t i = 0; i < x.size(); ++i) x[i] += b[i];
}

void scale_inplace(std::span<float> x, float s) {
  for (float& v : x) v *= s;
}

void softcap_inplace(std::span<float> x, float cap) {
  const float inverse = 1.0f / cap;
  for (float& v : x) v = std::tanh(v * inverse) * cap;
}

void clamp_inplace(std::span<float> x, float lo, float hi) {
  // ggml's MAX(MIN(x, hi), lo), comparison for comparison (NaN becomes hi).
  for (float& v : x) {
    v = v < hi ? v : hi;
    v = v > lo ? v : lo;
  }
}

void add_bias_rows(std::span<float> rows, std::span<const float> bias) {
  if (bias.empty()) return;
  assert(rows.size() % bias.size() == 0);
  for (size_t start = 0; start + bias.size() <= rows.size(); start += bias.size()) {
    add_inplace(rows.subspan(start, bias.size()), bias);
  }
}

void divide_rows(std::span<float> rows, std::span<const float> divisor) {
  if (divisor.empty()) return;
  assert(rows.size() % divisor.size() == 0);
  for (size_t i = 0; i < rows.size(); ++i) rows[i] /= divisor[i % divisor.size()];
}

}  // namespace cortiq::kernels
