// The per-group scale searches behind the reference K-quant quantizers. Each
// takes one group of values and picks a scale (and, for the affine types, a
// min) together with the integer codes, trying a small set of candidate
// scales and keeping the one with the least weighted error. The searches,
// their candidate sets and their float arithmetic follow the peer's
// reference quantizer step for step: the bytes must come out identical.
#pragma once

#include <cstdint>
#include <span>

namespace cortiq::quant {

// Symmetric codes in [-nmax, nmax - 1], stored biased by nmax in `codes`,
// weighted by x^2. Returns the scale (x ~ scale * (code - nmax)); 0 and
// all-zero codes for a group whose magnitudes are all below kGroupMaxEps.
// Used by Q6_K.
float search_symmetric_scale(int nmax, std::span<const float> x, std::span<int8_t> codes);

// As search_symmetric_scale but refined by moving one code at a time (up to
// five passes) while that improves the weighted fit. Used by Q3_K.
float search_symmetric_scale_refined(int nmax, std::span<const float> x, std::span<int8_t> codes);

struct ScaleMin {
  float scale;
  float min;  // subtracted: x ~ scale * code - min, min >= 0
};

// Affine codes in [0, nmax] for x ~ scale * code - min, trying nstep + 1
// candidate scales (nmax + rmin + rdelta * k) / range and solving the
// weighted least-squares scale and min for each. use_mad picks absolute
// instead of squared error. `scratch` holds the candidate codes.
ScaleMin search_affine_scale(int nmax, std::span<const float> x, std::span<const float> weights,
                             std::span<uint8_t> codes, std::span<uint8_t> scratch, float rmin,
                             float rdelta, int nstep, bool use_mad);

}  // namespace cortiq::quant
