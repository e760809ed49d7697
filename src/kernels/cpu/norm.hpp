// Normalisations, computed as the peer does (sum of squares in double, the
// scale in float, then the weight multiplied in a second rounding step).
#pragma once

#include <span>

namespace cortiq::kernels {

// out = x / sqrt(mean(x^2) + eps) * weight, one row; weight may be empty
// (no multiplication). out may alias x. Sizes must agree.
void rms_norm(std::span<const float> x, std::span<const float> weight, float eps,
              std::span<float> out);

}  // namespace cortiq::kernels
