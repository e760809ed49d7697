// RoPE as the peer computes it (ggml-cpu ops.cpp: ggml_rope_cache_init,
// rope_yarn, rotate_pairs; ggml.c: ggml_rope_yarn_corr_dims), in float and
// in the same order of operations, so the cos/sin values match bit for bit
// where the libm's cosf/sinf/powf/logf agree (checked against the peer's
// ggml_rope_ext). The rotation is two products and a difference, unfused
// (-ffp-contract=off); the peer's build contracts it into
// fma(x0, cos, -(x1 * sin)), so about one output in five differs from it
// by an ulp.
#include "kernels/cpu/rope.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <numbers>

namespace cortiq::kernels {
namespace {

// The dimension below which a frequency of n_rot turns per original
// context is extrapolated (YaRN's "correction dim").
float yarn_corr_dim(int32_t n_dims, int32_t n_ctx_orig, float n_rot, float base) {
  const auto pi = static_cast<float>(std::numbers::pi);
  return static_cast<float>(n_dims) * std::log(static_cast<float>(n_ctx_orig) / (n_rot * 2 * pi)) /
         (2 * std::log(base));
}

struct CorrDims {
  float low;
  float high;
};

// Written with the ternaries of the peer's MAX/MIN macros, which differ from
// std::max/min only for NaN (n_ctx_orig = 0 gives -inf here, never NaN).
CorrDims yarn_corr_dims(const RopeParams& p) {
  const float start = std::floor(yarn_corr_dim(p.n_dims, p.n_ctx_orig, p.beta_fast, p.freq_base));
  const float end = std::ceil(yarn_corr_dim(p.n_dims, p.n_ctx_orig, p.beta_slow, p.freq_base));
  const float last = static_cast<float>(p.n_dims - 1);
  return {0.0f > start ? 0.0f : start, last < end ? last : end};
}

// 1 for pairs below low (pure extrapolation), 0 above high (pure
// interpolation), linear in between. i0 / 2 is the pair index, in integers.
float yarn_ramp(CorrDims dims, int32_t i0) {
  const float y = (static_cast<float>(i0 / 2) - dims.low) / std::max(0.001f, dims.high - dims.low);
  return 1 - std::min(1.0f, std::max(0.0f, y));
}

}  // namespace

bool mrope_text_pair_unturned(const RopeParams& params, int32_t pair) {
  if (params.mrope == MRope::none) return false;
  const auto& s = params.mrope_sections;
  const int32_t sector = pair % (s[0] + s[1] + s[2] + s[3]);
  if (params.mrope == MRope::interleaved) {
    // t, h, w in turn while each section lasts; the rest is extra.
    const bool t = sector % 3 == 0 && sector < 3 * s[0];
    const bool h = sector % 3 == 1 && sector < 3 * s[1];
    const bool w = sector % 3 == 2 && sector < 3 * s[2];
    return !(t || h || w);
  }
  return sector >= s[0] + s[1] + s[2];
}

void rope_cache(int32_t pos, const RopeParams& params, std::span<float> cache) {
  const int32_t n_dims = params.n_dims;
  assert(n_dims % 2 == 0 && cache.size() >= static_cast<size_t>(n_dims));
  assert(params.freq_factors.empty() ||
         params.freq_factors.size() >= static_cast<size_t>(n_dims / 2));
  const float theta_scale = std::pow(params.freq_base, -2.0f / static_cast<float>(n_dims));
  const CorrDims corr = yarn_corr_dims(params);
  // YaRN's magnitude correction is a constant of the run, applied to every
  // pair as ggml's rope_yarn does.
  float mscale = params.attn_factor;
  if (params.ext_factor != 0.0f) mscale *= 1.0f + 0.1f * std::log(1.0f / params.freq_scale);

  // theta is multiplied pair by pair (not pow(base, i) per pair): the
  // rounding of the running product is part of the peer's numbers.
  float theta = static_cast<float>(pos);
  for (int32_t i0 = 0; i0 < n_dims; i0 += 2) {
    const float ff = params.freq_factors.empty() ? 1.0f : params.freq_factors[i0 / 2];
    // M-RoPE's extra section: position 0 for text, whose theta stays 0.
    const bool unturned = params.mrope != MRope::none && mrope_text_pair_unturned(params, i0 / 2);
    const float theta_extrap = (unturned ? 0.0f : theta) / ff;
    const float theta_interp = params.freq_scale * theta_extrap;
    float rotated = theta_interp;
    if (params.ext_factor != 0.0f) {
      const float ramp_mix = yarn_ramp(corr, i0) * params.ext_factor;
      rotated = theta_interp * (1 - ramp_mix) + theta_extrap * ramp_mix;
    }
    cache[i0] = std::cos(rotated) * mscale;
    cache[i0 + 1] = std::sin(rotated) * mscale;
    theta *= theta_scale;
  }
}

void rope_apply(std::span<float> heads, int64_t n_heads, int64_t head_dim, const RopeParams& params,
                std::span<const float> cache) {
  const int64_t n_dims = params.n_dims;
  assert(heads.size() == static_cast<size_t>(n_heads * head_dim));
  assert(n_dims % 2 == 0 && n_dims <= head_dim && cache.size() >= static_cast<size_t>(n_dims));
  // Pair i rotates (x[2i], x[2i+1]) in the normal layout and
  // (x[i], x[i + n_dims/2]) in NeoX; dimensions from n_dims on are left as
  // they are.
  const int64_t offset = params.neox ? n_dims / 2 : 1;
  for (int64_t h = 0; h < n_heads; ++h) {
    float* x = heads.data() + h * head_dim;
    for (int64_t i = 0; i < n_dims / 2; ++i) {
      const float cos_theta = cache[2 * i];
      const float sin_theta = cache[2 * i + 1];
      float* first = x + (params.neox ? i : 2 * i);
      const float x0 = first[0];
      const float x1 = first[offset];
      first[0] = x0 * cos_theta - x1 * sin_theta;
      first[offset] = x0 * sin_theta + x1 * cos_theta;
    }
  }
}

}  // namespace cortiq::kernels
