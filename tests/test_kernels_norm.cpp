// rms_norm against a double-precision reference, and the element-wise
// activations (silu, SwiGLU, residual add).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <vector>

#include "base/fp16.hpp"
#include "base/random.hpp"
#include "kernels/cpu/activations.hpp"
#include "kernels/cpu/norm.hpp"
#include "test_support.hpp"

namespace cortiq::kernels {
namespace {

using test::normal_values;

TEST(KernelRmsNorm, MatchesDoubleReference) {
  for (const size_t n : {1u, 7u, 64u, 4096u}) {
    const std::vector<float> x = normal_values(n, n, 3.0);
    const std::vector<float> w = normal_values(n + 1, n);
    const float eps = 1e-5f;
    double sum = 0;
    for (const float v : x) sum += static_cast<double>(v) * v;
    const double scale = 1.0 / std::sqrt(sum / static_cast<double>(n) + eps);
    std::vector<float> out(n), plain(n);
    rms_norm(x, w, eps, out);
    rms_norm(x, {}, eps, plain);
    for (size_t i = 0; i < n; ++i) {
      ASSERT_NEAR(plain[i], x[i] * scale, 1e-6 * std::fabs(x[i] * scale) + 1e-30) << n << " " << i;
      ASSERT_NEAR(out[i], x[i] * scale * w[i], 1e-6 * std::fabs(x[i] * scale * w[i]) + 1e-30);
      // The weight is a second float multiply of the normalized value.
      ASSERT_EQ(out[i], plain[i] * w[i]);
    }
  }
}

TEST(KernelRmsNorm, InPlaceAndEps) {
  std::vector<float> x = normal_values(3, 32);
  std::vector<float> expected(32);
  rms_norm(x, {}, 1e-6f, expected);
  rms_norm(x, {}, 1e-6f, x);
  EXPECT_EQ(x, expected);
  // A zero row stays finite thanks to eps.
  std::vector<float> zeros(16, 0.0f), out(16, 1.0f);
  rms_norm(zeros, {}, 1e-6f, out);
  for (const float v : out) EXPECT_EQ(v, 0.0f);
}

TEST(KernelActivations, SiluMatchesTheFormula) {
  for (const float x : {-20.0f, -3.5f, -1.0f, -1e-3f, 0.0f, 0.25f, 1.0f, 4.0f, 30.0f}) {
    const double expected = x / (1.0 + std::exp(-static_cast<double>(x)));
    EXPECT_NEAR(silu(x), expected, 1e-6 * std::fabs(expected) + 1e-30) << x;
  }
  // exp(100) overflows to inf in float: x / inf is -0, not NaN.
  EXPECT_EQ(silu(-100.0f), 0.0f);
  EXPECT_EQ(silu(100.0f), 100.0f);
}

TEST(KernelActivations, SwigluSiluAndAddInPlace) {
  // 43 elements: whole SIMD chunks and a tail; a few gates where
  // exp_approx leaves its plain range (both SIMD and scalar must agree).
  std::vector<float> gate = normal_values(5, 43, 2.0);
  gate[3] = -100.0f, gate[11] = 150.0f, gate[17] = -95.0f, gate[41] = -120.0f;
  const std::vector<float> up = normal_values(6, 43);
  std::vector<float> out(43);
  swiglu(gate, up, out);
  for (size_t i = 0; i < out.size(); ++i) ASSERT_EQ(out[i], silu(gate[i]) * up[i]);
  std::vector<float> aliased = gate;
  swiglu(aliased, up, aliased);
  EXPECT_EQ(aliased, out);
  aliased = up;
  swiglu(gate, aliased, aliased);
  EXPECT_EQ(aliased, out);

  std::vector<float> activated = gate;
  silu_inplace(activated);
  for (size_t i = 0; i < activated.size(); ++i) {
    ASSERT_EQ(std::bit_cast<uint32_t>(activated[i]), std::bit_cast<uint32_t>(silu(gate[i]))) << i;
  }

  std::vector<float> sum = gate;
  add_inplace(sum, up);
  for (size_t i = 0; i < sum.size(); ++i) ASSERT_EQ(sum[i], gate[i] + up[i]);
}

// GELU as ggml's CPU backend computes it: the exact tanh formula evaluated
// once per fp16 input, the result rounded to fp16; identity above 10, 0 below -10.
TEST(KernelActivations, GeluTanhIsTheFp16Table) {
  const auto formula = [](float x) {
    return 0.5f * x *
           (1.0f + std::tanh(0.79788456080286535587989211986876f * x * (1.0f + 0.044715f * x * x)));
  };
  for (const float x : {-3.0f, -0.5f, 0.0f, 0.25f, 1.0f, 2.5f, 9.5f}) {
    const float h = fp16_to_fp32(fp32_to_fp16(x));
    EXPECT_EQ(kernels::gelu_tanh(x), fp16_to_fp32(fp32_to_fp16(formula(h)))) << x;
  }
  EXPECT_EQ(kernels::gelu_tanh(-10.0f), 0.0f);
  EXPECT_EQ(kernels::gelu_tanh(12.5f), 12.5f);
  // Inputs that round to the same fp16 give the same output.
  EXPECT_EQ(kernels::gelu_tanh(1.0f), kernels::gelu_tanh(1.0f + 1e-5f));
}

TEST(KernelActivations, GegluMultipliesTheGatedValueAndMayAlias) {
  std::vector<float> gate = {-11.0f, -1.0f, 0.5f, 3.0f, 10.0f}, up = {2, 3, 4, 5, 6};
  std::vector<float> expected(gate.size());
  for (size_t i = 0; i < gate.size(); ++i) {
    expected[i] = gate[i] <= -10.0f ? 0.0f : kernels::gelu_tanh(gate[i]) * up[i];
  }
  kernels::geglu(gate, up, gate);
  EXPECT_EQ(gate, expected);
}

// ggml_relu then ggml_sqr (LLM_FFN_RELU_SQR): 0 for x <= 0 (and NaN), x*x above.
TEST(KernelActivations, ReluSquaredZeroesNegativesAndSquaresTheRest) {
  std::vector<float> x = {-2.0f, -0.0f, 0.0f, 0.5f, 3.0f, 1e20f, -1e-30f, std::nanf("")};
  kernels::relu_sqr_inplace(x);
  const std::vector<float> expected = {0.0f, 0.0f, 0.0f, 0.25f, 9.0f, 1e20f * 1e20f, 0.0f, 0.0f};
  EXPECT_EQ(x, expected);
  EXPECT_FALSE(std::signbit(x[1]));
}

// llama.cpp's final-logit softcap: ggml_scale by 1/cap, ggml_tanh (tanhf),
// ggml_scale by cap — each step rounded to float, as three separate passes.
TEST(KernelActivations, SoftcapIsScaleTanhScale) {
  std::vector<float> x = {-1e4f, -31.0f, -0.3f, 0.0f, 1e-3f, 7.25f, 29.9f, 1e30f};
  std::vector<float> expected = x;
  const float cap = 30.0f;
  for (float& v : expected) v *= 1.0f / cap;
  for (float& v : expected) v = std::tanh(v);
  for (float& v : expected) v *= cap;
  kernels::softcap_inplace(x, cap);
  EXPECT_EQ(x, expected);
  EXPECT_EQ(x.back(), cap);
  EXPECT_EQ(x.front(), -cap);
}

// GPT-OSS's clamped SwiGLU, as ggml_swiglu_oai: the gate clamped above
// only, the up branch both ways and shifted by one.
TEST(KernelActivations, SwigluOaiClampsTheGateAboveAndTheUpBothWays) {
  const std::vector<float> gate = {-20.0f, -1.0f, 0.0f, 0.5f, 6.9f, 7.0f, 50.0f};
  const std::vector<float> up = {3.0f, -9.0f, 0.25f, -7.5f, 8.0f, -1.0f, 100.0f};
  std::vector<float> out(gate.size());
  kernels::swiglu_oai(gate, up, out, 1.702f, 7.0f);
  for (size_t i = 0; i < gate.size(); ++i) {
    const float g = std::min(gate[i], 7.0f);
    const float u = std::max(std::min(up[i], 7.0f), -7.0f);
    EXPECT_EQ(out[i], g / (1.0f + std::exp(1.702f * -g)) * (u + 1.0f)) << i;
  }
  // gate 50 counts as 7, up 100 as 7: 7 * sigmoid(1.702 * 7) * 8.
  EXPECT_NEAR(out.back(), 7.0 / (1.0 + std::exp(-1.702 * 7.0)) * 8.0, 1e-4);
  EXPECT_EQ(out[2], 0.0f);
  // In place over the gate, as the experts run it.
  std::vector<float> in_place = gate;
  kernels::swiglu_oai(in_place, up, in_place, 1.702f, 7.0f);
  EXPECT_EQ(in_place, out);
}

// ggml_clamp's MAX(MIN(x, hi), lo): values outside [lo, hi] go to the
// edge, the rest stay; NaN compares false and ends at hi (OLMo's clamp_kqv).
TEST(KernelActivations, ClampKeepsValuesWithinTheEdges) {
  std::vector<float> x = {-3.0f, -0.5f, 0.0f, 0.25f, 0.5f, 7.0f, std::nanf("")};
  kernels::clamp_inplace(x, -0.5f, 0.5f);
  const std::vector<float> expected = {-0.5f, -0.5f, 0.0f, 0.25f, 0.5f, 0.5f, 0.5f};
  EXPECT_EQ(x, expected);
}

// A layer norm without weight or bias (OLMo's): zero mean, unit variance.
TEST(KernelLayerNorm, WithoutWeightOrBiasNormalisesEachRow) {
  const std::vector<float> x = {1, 2, 3, 4, 10, 10, 10, 14};
  std::vector<float> out(x.size());
  kernels::layer_norm_rows(x, {}, {}, 1e-5f, out, 4);
  for (size_t row = 0; row < 2; ++row) {
    double mean = 0, var = 0;
    for (size_t i = 0; i < 4; ++i) mean += out[row * 4 + i] / 4.0;
    for (size_t i = 0; i < 4; ++i) var += (out[row * 4 + i] - mean) * (out[row * 4 + i] - mean) / 4;
    EXPECT_NEAR(mean, 0.0, 1e-6);
    EXPECT_NEAR(var, 1.0, 1e-4);
  }
}

// ggml_xielu (Apertus): alpha_p x^2 + beta x above 0; below, expm1 of x
// clamped to at most eps, so inputs between eps and 0 all see expm1(eps).
TEST(KernelActivations, XieluFollowsGgmlsDefinition) {
  // softplus(0) = ln 2; softplus above 20 is its input.
  const XieluParams p = xielu_params(0.0f, 0.0f, 0.5f, -1e-6f);
  EXPECT_NEAR(p.alpha_p, 0.69314718f, 1e-7f);
  EXPECT_NEAR(p.alpha_n, 0.5f + 0.69314718f, 1e-7f);
  EXPECT_EQ(xielu_params(25.0f, 21.0f, 0.25f, 0.0f).alpha_p, 21.0f);
  EXPECT_EQ(xielu_params(25.0f, 21.0f, 0.25f, 0.0f).alpha_n, 25.25f);
  std::vector<float> x = {2.0f, -1.0f, 0.0f, -1e-7f, -30.0f};
  xielu_inplace(x, p);
  const double an = 0.5 + std::log(2.0), ap = std::log(2.0);
  EXPECT_NEAR(x[0], ap * 4 + 1.0, 1e-6);
  EXPECT_NEAR(x[1], (std::expm1(-1.0) + 1.0) * an - 0.5, 1e-6);
  EXPECT_NEAR(x[2], std::expm1(-1e-6) * an, 1e-12);
  EXPECT_NEAR(x[3], (std::expm1(-1e-6) + 1e-7) * an - 0.5e-7, 1e-12);
  EXPECT_NEAR(x[4], (std::expm1(-30.0) + 30.0) * an - 15.0, 1e-4);
}

}  // namespace
}  // namespace cortiq::kernels
