// RoPE: the pair layouts on a hand-checked case, norm preservation, partial
// rotation, freq_factors, and YaRN against a direct double-precision
// implementation of ggml's formulas.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <numbers>
#include <vector>

#include "base/random.hpp"
#include "kernels/cpu/rope.hpp"

namespace cortiq::kernels {
namespace {

std::vector<float> normal_values(uint64_t seed, size_t n) {
  NormalSampler normal(seed);
  std::vector<float> x(n);
  for (float& v : x) v = static_cast<float>(normal.next());
  return x;
}

std::vector<float> cache_for(int32_t pos, const RopeParams& params) {
  std::vector<float> cache(static_cast<size_t>(params.n_dims));
  rope_cache(pos, params, cache);
  return cache;
}

// Head of 6 with 4 rotated dims at position 1, base 10000: pair 0 turns by
// 1 radian, pair 1 by 10000^(-1/2) = 0.01; dims 4 and 5 stay.
TEST(KernelRope, NormalAndNeoxPairLayouts) {
  RopeParams params;
  params.n_dims = 4;
  const std::vector<float> cache = cache_for(1, params);
  EXPECT_NEAR(cache[0], std::cos(1.0), 1e-7);
  EXPECT_NEAR(cache[1], std::sin(1.0), 1e-7);
  EXPECT_NEAR(cache[2], std::cos(0.01), 1e-7);
  EXPECT_NEAR(cache[3], std::sin(0.01), 1e-7);

  const std::vector<float> x = {1, 2, 3, 4, 5, 6};
  auto rotated = [](double a, double b, double t) {
    return std::pair{a * std::cos(t) - b * std::sin(t), a * std::sin(t) + b * std::cos(t)};
  };
  std::vector<float> normal = x;
  rope_apply(normal, 1, 6, params, cache);
  const auto [n0, n1] = rotated(1, 2, 1.0);
  const auto [n2, n3] = rotated(3, 4, 0.01);
  const std::vector<double> expected_normal = {n0, n1, n2, n3, 5, 6};
  for (size_t i = 0; i < 6; ++i) EXPECT_NEAR(normal[i], expected_normal[i], 1e-6) << i;

  params.neox = true;
  std::vector<float> neox = x;
  rope_apply(neox, 1, 6, params, cache);
  const auto [m0, m2] = rotated(1, 3, 1.0);
  const auto [m1, m3] = rotated(2, 4, 0.01);
  const std::vector<double> expected_neox = {m0, m1, m2, m3, 5, 6};
  for (size_t i = 0; i < 6; ++i) EXPECT_NEAR(neox[i], expected_neox[i], 1e-6) << i;
}

// attn_factor 1 without YaRN: every pair keeps its length; the dims past
// n_dims are bitwise untouched; every head gets the same rotation.
TEST(KernelRope, PreservesNormAndLeavesPartialDims) {
  for (const bool neox : {false, true}) {
    RopeParams params;
    params.n_dims = 32;
    params.neox = neox;
    params.freq_base = 500000.0f;
    const int64_t head_dim = 48, n_heads = 3;
    const std::vector<float> x = normal_values(neox ? 2 : 1, head_dim * n_heads);
    std::vector<float> y = x;
    rope_apply(y, n_heads, head_dim, params, cache_for(1234, params));
    for (int64_t h = 0; h < n_heads; ++h) {
      const float* a = x.data() + h * head_dim;
      const float* b = y.data() + h * head_dim;
      for (int64_t i = 0; i < 16; ++i) {
        const int64_t i0 = neox ? i : 2 * i, i1 = neox ? i + 16 : 2 * i + 1;
        const double before = std::hypot(a[i0], a[i1]), after = std::hypot(b[i0], b[i1]);
        ASSERT_NEAR(after, before, 1e-6 * (1 + before)) << neox << " head " << h << " pair " << i;
      }
      for (int64_t i = 32; i < head_dim; ++i) ASSERT_EQ(b[i], a[i]);
    }
    // Position 0 is the identity.
    std::vector<float> z = x;
    rope_apply(z, n_heads, head_dim, params, cache_for(0, params));
    EXPECT_EQ(z, x);
  }
}

// freq_factors divide each pair's angle (llama3's rope_freqs).
TEST(KernelRope, FreqFactorsDivideTheta) {
  RopeParams params;
  params.n_dims = 16;
  const std::vector<float> factors = {1, 1, 2, 4, 8, 8, 16, 32};
  params.freq_factors = factors;
  const int32_t pos = 21;
  const std::vector<float> cache = cache_for(pos, params);
  for (int i = 0; i < 8; ++i) {
    const double theta = pos * std::pow(10000.0, -2.0 * i / 16) / factors[i];
    EXPECT_NEAR(cache[2 * i], std::cos(theta), 2e-6 * (1 + theta)) << i;
    EXPECT_NEAR(cache[2 * i + 1], std::sin(theta), 2e-6 * (1 + theta)) << i;
  }
}

// ggml's YaRN, written out in double: the ramp between the corrected dims,
// the mix of interpolated and extrapolated angles, and the magnitude scale.
std::vector<double> yarn_reference(int32_t pos, const RopeParams& p) {
  const double pi = std::numbers::pi;
  auto corr_dim = [&](double n_rot) {
    return p.n_dims * std::log(p.n_ctx_orig / (n_rot * 2 * pi)) / (2 * std::log(p.freq_base));
  };
  const double low = std::max(0.0, std::floor(corr_dim(p.beta_fast)));
  const double high = std::min(p.n_dims - 1.0, std::ceil(corr_dim(p.beta_slow)));
  const double mscale = p.attn_factor * (1 + 0.1 * std::log(1.0 / p.freq_scale));
  std::vector<double> cache;
  for (int i = 0; i < p.n_dims / 2; ++i) {
    const double extrap = pos * std::pow(p.freq_base, -2.0 * i / p.n_dims);
    const double interp = p.freq_scale * extrap;
    const double y = (i - low) / std::max(0.001, high - low);
    const double mix = (1 - std::clamp(y, 0.0, 1.0)) * p.ext_factor;
    const double theta = interp * (1 - mix) + extrap * mix;
    cache.push_back(std::cos(theta) * mscale);
    cache.push_back(std::sin(theta) * mscale);
  }
  return cache;
}

TEST(KernelRope, YarnMatchesDirectFormula) {
  RopeParams params;
  params.n_dims = 64;
  params.freq_base = 10000.0f;
  params.freq_scale = 0.25f;
  params.ext_factor = 1.0f;
  params.attn_factor = 1.0f;
  params.n_ctx_orig = 4096;
  // Corrected dims here: floor(10.47) = 10 and ceil(22.5) = 23, so pairs
  // below 10 extrapolate, pairs from 23 on interpolate, the rest mix.
  for (const int32_t pos : {1, 17, 200}) {
    const std::vector<float> cache = cache_for(pos, params);
    const std::vector<double> expected = yarn_reference(pos, params);
    for (size_t i = 0; i < cache.size(); ++i) {
      ASSERT_NEAR(cache[i], expected[i], 4e-6 * (1 + pos)) << "pos " << pos << " element " << i;
    }
  }
  // The magnitude scale stretches every rotated pair by 1 + 0.1 ln 4.
  const std::vector<float> x = normal_values(9, 64);
  std::vector<float> y = x;
  rope_apply(y, 1, 64, params, cache_for(33, params));
  const double mscale = 1 + 0.1 * std::log(4.0);
  for (int i = 0; i < 32; ++i) {
    ASSERT_NEAR(std::hypot(y[2 * i], y[2 * i + 1]), mscale * std::hypot(x[2 * i], x[2 * i + 1]),
                1e-5);
  }
  // attn_factor scales on top; without ext_factor there is no YaRN scale.
  params.attn_factor = 0.5f;
  params.ext_factor = 0.0f;
  const std::vector<float> linear = cache_for(8, params);
  for (int i = 0; i < 32; ++i) {
    const double theta = 0.25 * 8 * std::pow(10000.0, -2.0 * i / 64);
    ASSERT_NEAR(linear[2 * i], 0.5 * std::cos(theta), 1e-6) << i;
  }
}

// The section (0 t, 1 h, 2 w, 3 extra) whose position pair j turns by, as
// ggml's M-RoPE assigns them: pairs repeat in sectors of s0+s1+s2+s3
// pairs; in runs a sector's first s0 pairs are t, the next s1 h, the next
// s2 w, the rest extra; interleaved, t, h and w take turns (sector mod 3)
// while each has pairs left (sector < 3 * its count), the rest extra.
int section_of_pair(int32_t pair, const std::array<int32_t, 4>& s, bool interleaved) {
  const int32_t sector = pair % (s[0] + s[1] + s[2] + s[3]);
  if (interleaved) {
    const int turn = sector % 3;
    return sector < 3 * s[static_cast<size_t>(turn)] ? turn : 3;
  }
  if (sector < s[0]) return 0;
  if (sector < s[0] + s[1]) return 1;
  return sector < s[0] + s[1] + s[2] ? 2 : 3;
}

// Text positions (p, p, p, 0) through M-RoPE: Qwen2-VL's sections in runs
// and Qwen3-VL's interleaved ones give ggml's sector rule bit for bit; the pairs
// of the extra section (and, interleaved, those past a section's share)
// stay unturned, every other pair turns as plain RoPE's.
TEST(KernelRope, MropeForTextPositionsMatchesGgmlsSectors) {
  struct Case {
    std::array<int32_t, 4> sections;
    MRope mrope;
    int32_t n_dims;
  };
  for (const Case& c :
       {Case{{16, 24, 24, 0}, MRope::sections, 128}, Case{{24, 20, 20, 0}, MRope::interleaved, 128},
        Case{{2, 3, 2, 1}, MRope::sections, 16}, Case{{3, 2, 2, 1}, MRope::interleaved, 16},
        Case{{2, 1, 1, 0}, MRope::sections, 24}}) {
    RopeParams params;
    params.n_dims = c.n_dims;
    params.neox = true;
    params.freq_base = 1000000.0f;
    params.mrope = c.mrope;
    params.mrope_sections = c.sections;
    RopeParams plain = params;
    plain.mrope = MRope::none;
    for (const int32_t pos : {0, 1, 7, 300}) {
      const auto cache = cache_for(pos, params);
      const auto rope = cache_for(pos, plain);
      for (int32_t i = 0; i < c.n_dims; ++i) {
        const auto k = static_cast<size_t>(i);
        // A text token's t, h and w positions are its own, the extra one 0.
        const bool extra = section_of_pair(i / 2, c.sections, c.mrope == MRope::interleaved) == 3;
        const float expected = extra ? (i % 2 == 0 ? 1.0f : 0.0f) : rope[k];
        ASSERT_EQ(cache[k], expected) << "pair " << i / 2 << " pos " << pos;
        ASSERT_EQ(mrope_text_pair_unturned(params, i / 2), extra) << "pair " << i / 2;
        if (mrope_text_pair_unturned(params, i / 2)) {
          ASSERT_EQ(cache[k], i % 2 == 0 ? 1.0f : 0.0f);
        } else {
          ASSERT_EQ(cache[k], rope[k]);
        }
      }
    }
  }
  // Qwen3-VL's [24, 20, 20]: of 64 pairs, 61 and 62 fall past the h and w
  // shares and stay unturned.
  RopeParams qwen3vl;
  qwen3vl.n_dims = 128;
  qwen3vl.mrope = MRope::interleaved;
  qwen3vl.mrope_sections = {24, 20, 20, 0};
  for (int32_t pair = 0; pair < 64; ++pair) {
    EXPECT_EQ(mrope_text_pair_unturned(qwen3vl, pair), pair == 61 || pair == 62) << pair;
  }
}

}  // namespace
}  // namespace cortiq::kernels
