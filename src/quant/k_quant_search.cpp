#include "quant/k_quant_search.hpp"

#include <algorithm>
#include <cmath>

#include "quant/scalar_math.hpp"

namespace cortiq::quant {
namespace {

// The value of largest magnitude (with its sign), and that magnitude; the
// first one wins a tie.
struct SignedMax {
  float value = 0.0f;
  float magnitude = 0.0f;
};

SignedMax signed_max(std::span<const float> x) {
  SignedMax result;
  for (const float v : x) {
    const float magnitude = std::fabs(v);
    if (magnitude > result.magnitude) result = {v, magnitude};
  }
  return result;
}

int clamp_symmetric(int code, int nmax) {
  return std::max(-nmax, std::min(nmax - 1, code));
}

// Weighted sums of the least-squares fit x ~ scale * l with weights x^2:
// scale = sum_lx / sum_l2. The accumulation order is the peer's.
struct SymmetricFit {
  float sum_lx = 0.0f;
  float sum_l2 = 0.0f;
};

SymmetricFit fit_at(float iscale, int nmax, std::span<const float> x) {
  SymmetricFit fit;
  for (const float v : x) {
    const int l = clamp_symmetric(nearest_int(iscale * v), nmax);
    const float w = v * v;
    fit.sum_lx += w * v * static_cast<float>(l);
    fit.sum_l2 += w * static_cast<float>(l) * static_cast<float>(l);
  }
  return fit;
}

void store_biased_codes(float iscale, int nmax, std::span<const float> x, std::span<int8_t> codes) {
  for (size_t i = 0; i < x.size(); ++i) {
    codes[i] = static_cast<int8_t>(nmax + clamp_symmetric(nearest_int(iscale * x[i]), nmax));
  }
}

// One pass of the coordinate descent of search_symmetric_scale_refined:
// for each element, the code that is best given all the others, kept when
// it improves sum_lx^2 / sum_l2. Returns how many codes changed.
int refine_codes_once(int nmax, std::span<const float> x, std::span<int8_t> codes,
                      SymmetricFit& fit) {
  int n_changed = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const float w = x[i] * x[i];
    const float l_old = static_cast<float>(codes[i]);
    float slx = fit.sum_lx - w * x[i] * l_old;
    if (!(slx > 0)) continue;
    float sl2 = fit.sum_l2 - w * l_old * l_old;
    const int new_l = clamp_symmetric(nearest_int(x[i] * sl2 / slx), nmax);
    if (new_l == codes[i]) continue;
    const float l_new = static_cast<float>(new_l);
    slx += w * x[i] * l_new;
    sl2 += w * l_new * l_new;
    // Compare sum_lx^2 / sum_l2 without dividing, in the peer's order.
    if (sl2 > 0 && slx * slx * fit.sum_l2 > fit.sum_lx * fit.sum_lx * sl2) {
      codes[i] = static_cast<int8_t>(new_l);
      fit = {slx, sl2};
      ++n_changed;
    }
  }
  return n_changed;
}

float weighted_error(float scale, float min, std::span<const uint8_t> codes,
                     std::span<const float> x, std::span<const float> weights, bool use_mad) {
  float error = 0.0f;
  for (size_t i = 0; i < x.size(); ++i) {
    float diff = scale * static_cast<float>(codes[i]) + min - x[i];
    diff = use_mad ? std::fabs(diff) : diff * diff;
    error += weights[i] * diff;
  }
  return error;
}

}  // namespace

float search_symmetric_scale(int nmax, std::span<const float> x, std::span<int8_t> codes) {
  const SignedMax max = signed_max(x);
  if (max.magnitude < kGroupMaxEps) {
    std::fill(codes.begin(), codes.end(), int8_t{0});
    return 0.0f;
  }
  float iscale = static_cast<float>(-nmax) / max.value;
  store_biased_codes(iscale, nmax, x, codes);
  SymmetricFit fit = fit_at(iscale, nmax, x);
  float scale = fit.sum_l2 != 0.0f ? fit.sum_lx / fit.sum_l2 : 0.0f;
  float best = scale * fit.sum_lx;
  // Nudge the grid size by +-0.1 .. +-0.9 and keep the best weighted fit.
  for (int step = -9; step <= 9; ++step) {
    if (step == 0) continue;
    iscale = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(step)) / max.value;
    fit = fit_at(iscale, nmax, x);
    if (fit.sum_l2 > 0 && fit.sum_lx * fit.sum_lx > best * fit.sum_l2) {
      store_biased_codes(iscale, nmax, x, codes);
      scale = fit.sum_lx / fit.sum_l2;
      best = scale * fit.sum_lx;
    }
  }
  return scale;
}

float search_symmetric_scale_refined(int nmax, std::span<const float> x, std::span<int8_t> codes) {
  const SignedMax max = signed_max(x);
  if (max.magnitude < kGroupMaxEps) {
    std::fill(codes.begin(), codes.end(), int8_t{0});
    return 0.0f;
  }
  const float iscale = static_cast<float>(-nmax) / max.value;
  // Unbiased codes while refining; biased by nmax at the end.
  for (size_t i = 0; i < x.size(); ++i) {
    codes[i] = static_cast<int8_t>(clamp_symmetric(nearest_int(iscale * x[i]), nmax));
  }
  SymmetricFit fit = fit_at(iscale, nmax, x);
  constexpr int kMaxPasses = 5;
  for (int pass = 0; pass < kMaxPasses; ++pass) {
    if (refine_codes_once(nmax, x, codes, fit) == 0) break;
  }
  for (int8_t& code : codes) code = static_cast<int8_t>(code + nmax);
  return fit.sum_l2 > 0.0f ? fit.sum_lx / fit.sum_l2 : 0.0f;
}

ScaleMin search_affine_scale(int nmax, std::span<const float> x, std::span<const float> weights,
                             std::span<uint8_t> codes, std::span<uint8_t> scratch, float rmin,
                             float rdelta, int nstep, bool use_mad) {
  const size_t n = x.size();
  float min = x[0];
  float max = x[0];
  float sum_w = weights[0];
  float sum_x = sum_w * x[0];
  for (size_t i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    sum_w += weights[i];
    sum_x += weights[i] * x[i];
  }
  // The min is never positive: codes start at zero.
  if (min > 0) min = 0;
  if (max == min) {
    std::fill(codes.begin(), codes.end(), uint8_t{0});
    return {0.0f, -min};
  }
  const auto code_at = [&](float iscale, float value) {
    return static_cast<uint8_t>(std::max(0, std::min(nmax, nearest_int(iscale * (value - min)))));
  };
  float iscale = static_cast<float>(nmax) / (max - min);
  float scale = 1 / iscale;
  for (size_t i = 0; i < n; ++i) codes[i] = code_at(iscale, x[i]);
  float best_error = weighted_error(scale, min, codes, x, weights, use_mad);
  if (nstep < 1) return {scale, -min};

  for (int step = 0; step <= nstep; ++step) {
    iscale = (rmin + rdelta * static_cast<float>(step) + static_cast<float>(nmax)) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (size_t i = 0; i < n; ++i) {
      scratch[i] = code_at(iscale, x[i]);
      const float l = static_cast<float>(scratch[i]);
      const float w = weights[i];
      sum_l += w * l;
      sum_l2 += w * l * l;
      sum_xl += w * l * x[i];
    }
    // Weighted least squares for x ~ this_scale * l + this_min.
    const float det = sum_w * sum_l2 - sum_l * sum_l;
    if (!(det > 0)) continue;
    float this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
    float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
    if (this_min > 0) {
      this_min = 0;
      this_scale = sum_xl / sum_l2;
    }
    const float error = weighted_error(this_scale, this_min, scratch.first(n), x, weights, use_mad);
    if (error < best_error) {
      std::copy_n(scratch.begin(), n, codes.begin());
      best_error = error;
      scale = this_scale;
      min = this_min;
    }
  }
  return {scale, -min};
}

}  // namespace cortiq::quant
