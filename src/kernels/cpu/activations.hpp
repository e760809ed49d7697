// Element-wise pieces of the feed-forward block.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>

namespace cortiq::kernels {

// e^x to ~1.5 ulp by range reduction and a polynomial (the peer's SIMD exp);
// 0 below about -104, inf above about 88.7, NaN for NaN.
float exp_approx(float x);

// silu(x) = x / (1 + e^-x) with exp_approx, as the peer's SIMD paths compute it.
float silu(float x);

// out[i] = silu(gate[i]) * up[i] (SwiGLU). out may alias gate or up.
void swiglu(std::span<const float> gate, std::span<const float> up, std::span<float> out);

// x[i] = silu(x[i]).
void silu_inplace(std::span<float> x);

namespace avx2 {
// swiglu / silu_inplace over the first n - n % 8 elements, the scalar's
// bits; return how many they did (the caller finishes the rest).
size_t swiglu(const float* gate, const float* up, float* out, size_t n);
size_t silu_inplace(float* x, size_t n);
}  // namespace avx2

// GELU with the tanh approximation, as ggml's CPU backend computes it: for
// -10 < x < 10 through a table over fp16 inputs holding fp16 results
// (ggml_table_gelu_f16), so x is rounded to fp16 and the result too; 0
// below, x above.
float gelu_tanh(float x);
// gelu_tanh's table: the fp16 result for every fp16 input bit pattern (what
// a device reads to give the CPU's bits).
std::span<const uint16_t, 65536> gelu_fp16_table();

// x[i] = gelu_tanh(x[i]) (ggml_gelu).
void gelu_inplace(std::span<float> x);

// out[i] = gelu_tanh(gate[i]) * up[i] (GeGLU). out may alias gate or up.
void geglu(std::span<const float> gate, std::span<const float> up, std::span<float> out);

// GPT-OSS's constants for it (llama.cpp's build_moe_ffn).
inline constexpr float kSwigluOaiAlpha = 1.702f;
inline constexpr float kSwigluOaiLimit = 7.0f;

// GPT-OSS's clamped SwiGLU (ggml_swiglu_oai), operation for operation:
// g = min(gate, limit), u = clamp(up, -limit, limit),
// out = g / (1 + expf(alpha * -g)) * (u + 1). out may alias gate or up.
void swiglu_oai(std::span<const float> gate, std::span<const float> up, std::span<float> out,
                float alpha, float limit);

// x[i] = relu(x[i])^2 (ggml_relu then ggml_sqr: 0 for x <= 0 and NaN).
void relu_sqr_inplace(std::span<float> x);

// ggml's softplus: log(1 + e^x) in float, x itself above 20.
inline float softplus(float x) {
  return x > 20.0f ? x : std::log(1.0f + std::exp(x));
}

// ggml's sigmoid: 1 / (1 + e^-x) in float.
inline float sigmoid(float x) {
  return 1.0f / (1.0f + std::exp(-x));
}

// x[i] = softplus(x[i]) (ggml_softplus).
void softplus_inplace(std::span<float> x);

// xIELU (Apertus), with the parameters as ggml_xielu stores them:
// alpha_p = softplus(a_p), alpha_n = beta + softplus(a_n) for the model's
// raw a_p, a_n (xielu_params).
struct XieluParams {
  float alpha_n = 0, alpha_p = 0, beta = 0, eps = 0;
};

// The stored parameters from the model's raw ones (softplus).
XieluParams xielu_params(float raw_alpha_n, float raw_alpha_p, float beta, float eps);

// x[i] = alpha_p x² + beta x for x > 0, else
// (expm1(min(x, eps)) - x) alpha_n + beta x (ggml_xielu).
void xielu_inplace(std::span<float> x, const XieluParams& p);

// x[i] += b[i]. Sizes must agree.
void add_inplace(std::span<float> x, std::span<const float> b);

// Each row of `rows` (as wide as divisor) /= divisor, element by element
// (ggml_div by a row); nothing for an empty divisor.
void divide_rows(std::span<float> rows, std::span<const float> divisor);

// x[i] *= s (ggml_mul by a one-element tensor, ggml_scale).
void scale_inplace(std::span<float> x, float s);

// x[i] = tanhf(x[i] * (1 / cap)) * cap: a logit softcap as llama.cpp's graph
// computes it (ggml_scale, ggml_tanh, ggml_scale), operation for operation.
void softcap_inplace(std::span<float> x, float cap);

// x[i] = max(min(x[i], hi), lo), as ggml_clamp computes it (NaN becomes hi).
void clamp_inplace(std::span<float> x, float lo, float hi);

// Adds bias to each row of `rows` (rows.size() a multiple of bias.size());
// an empty bias adds nothing.
void add_bias_rows(std::span<float> rows, std::span<const float> bias);

}  // namespace cortiq::kernels
