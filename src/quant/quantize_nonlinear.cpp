// Quantizers of the 4-bit non-uniform formats: IQ4_NL (a fixed 16-level
// grid with an fp16 scale per 32 values) and MXFP4 (E2M1 codes with a shared
// power-of-two E8M0 scale). Both match the peer's output without an
// importance matrix: IQ4_NL as its quantize_iq4_nl writes it (the scale
// search the model quantizer uses), MXFP4 as quantize_row_mxfp4_ref.
#include <cmath>
#include <cstdint>

#include "base/fp16.hpp"
#include "quant/quantizers.hpp"
#include "quant/scalar_math.hpp"

namespace cortiq::quant {
namespace {

using Values = std::span<const float, kBlock32>;

// Index of the grid level nearest to x (grid sorted ascending); a tie goes
// to the upper level. Values beyond the ends take the end levels.
int nearest_level(const std::array<int8_t, 16>& grid, float x) {
  if (x <= grid[0]) return 0;
  if (x >= grid[15]) return 15;
  int lo = 0;
  int hi = 15;
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (x < grid[mid]) {
      hi = mid;
    } else {
      lo = mid;
    }
  }
  return x - grid[hi - 1] < grid[hi] - x ? hi - 1 : hi;
}

// Weighted fit of x ~ d * grid[level(x * id)] with weights x^2.
struct GridFit {
  float sum_qx = 0.0f;
  float sum_q2 = 0.0f;
};

GridFit fit_grid(Values x, float id) {
  GridFit fit;
  for (const float v : x) {
    const float q = kIq4nlValues[nearest_level(kIq4nlValues, id * v)];
    const float w = v * v;
    fit.sum_qx += w * q * v;
    fit.sum_q2 += w * q * q;
  }
  return fit;
}

// The IQ4_NL block scale: start from the one mapping the extreme value onto
// the grid's end, then try 15 grid stretches around it and keep the scale
// with the best weighted least-squares fit.
float search_iq4_nl_scale(Values x) {
  constexpr int kTries = 7;
  float amax = 0.0f;
  float max = 0.0f;
  for (const float v : x) {
    if (std::fabs(v) > amax) {
      amax = std::fabs(v);
      max = v;
    }
  }
  if (amax < kGroupMaxEps) return 0.0f;
  const float grid_end = kIq4nlValues[0];
  const float d0 = -max / grid_end;
  GridFit fit = fit_grid(x, 1 / d0);
  float d = fit.sum_q2 > 0 ? fit.sum_qx / fit.sum_q2 : 0.0f;
  float best = d * fit.sum_qx;
  for (int step = -kTries; step <= kTries; ++step) {
    const float id = static_cast<float>(step + kIq4nlValues[0]) / max;
    fit = fit_grid(x, id);
    if (fit.sum_q2 > 0 && fit.sum_qx * fit.sum_qx > best * fit.sum_q2) {
      d = fit.sum_qx / fit.sum_q2;
      best = d * fit.sum_qx;
    }
  }
  return d;
}

void encode_iq4_nl(Values x, BlockIq4Nl& b) {
  const float d = search_iq4_nl_scale(x);
  b.d = fp32_to_fp16(d);
  // Codes come from the unrounded scale, as in the peer.
  const float id = d != 0.0f ? 1 / d : 0.0f;
  for (int j = 0; j < 16; ++j) {
    const int low = nearest_level(kIq4nlValues, id * x[j]);
    const int high = nearest_level(kIq4nlValues, id * x[j + 16]);
    b.qs[j] = static_cast<uint8_t>(low | (high << 4));
  }
}

// The E2M1 code whose value times the (halved) block scale is nearest to x;
// the first of equal candidates wins.
uint8_t nearest_mxfp4_code(float x, float scale) {
  int best = 0;
  float best_err = std::fabs(static_cast<float>(kMxfp4Values[0]) * scale - x);
  for (int i = 1; i < 16; ++i) {
    const float err = std::fabs(static_cast<float>(kMxfp4Values[i]) * scale - x);
    if (err < best_err) {
      best = i;
      best_err = err;
    }
  }
  return static_cast<uint8_t>(best);
}

// The shared exponent puts the block's largest magnitude in the top binade
// of E2M1 (4..6, i.e. 2^(e-127) * 4 <= amax). Via int so the narrowing to 8
// bits is defined (and agrees with the peer's direct conversion) even for a
// subnormal amax.
uint8_t mxfp4_exponent(float amax) {
  if (!(amax > 0.0f)) return 0;
  const float biased = std::floor(std::log2(amax)) - 2 + 127;
  return static_cast<uint8_t>(static_cast<int>(biased));
}

void encode_mxfp4(Values x, BlockMxfp4& b) {
  float amax = 0.0f;
  for (const float v : x) {
    if (amax < std::fabs(v)) amax = std::fabs(v);
  }
  b.e = mxfp4_exponent(amax);
  const float scale = e8m0_to_fp32_half(b.e);
  for (int j = 0; j < 16; ++j) {
    b.qs[j] = static_cast<uint8_t>(nearest_mxfp4_code(x[j], scale) |
                                   (nearest_mxfp4_code(x[j + 16], scale) << 4));
  }
}

}  // namespace

void quantize_iq4_nl(std::span<const float> src, std::span<std::byte> dst) {
  encode_blocks<BlockIq4Nl, kBlock32>(src, dst, encode_iq4_nl);
}
void quantize_mxfp4(std::span<const float> src, std::span<std::byte> dst) {
  encode_blocks<BlockMxfp4, kBlock32>(src, dst, encode_mxfp4);
}

}  // namespace cortiq::quant
