// Normalisations, computed as the peer does (sum of squares in double, the
// scale in float, then the weight multiplied in a second rounding step).
#pragma once

#include <span>

namespace cortiq::kernels {

// out = x / sqrt(mean(x^2) + eps) * weight, one row; weight may be empty
// (no multiplication). out may alias x. Sizes must agree.
void rms_norm(std::span<const float> x, std::span<const float> weight, float eps,
              std::span<float> out);

// rms_norm of each `width`-element row of x (x.size() a multiple of width).
// The weight is empty, one row of `width`, or k such rows that the rows of
// x take in turn (row i weight row i % k: a weight row per head, the rows
// being each head of each token). out may alias x.
void rms_norm_rows(std::span<const float> x, std::span<const float> weight, float eps,
                   std::span<float> out, size_t width);

// x / max(|x|, eps) in place (ggml_l2_norm: the sum of squares in double,
// each square rounded to float first).
void l2_norm(std::span<float> x, float eps);

// Layer norm as ggml_norm computes it, then the weight and the bias as the
// separate ggml_mul / ggml_add of llama.cpp's build_norm: mean = float(sum in
// double) / n; y = x - mean; variance = float(sum of float y*y in double / n);
// out = y * (1 / sqrt(variance + eps)) * weight + bias. weight and bias may
// be empty. out may alias x.
void layer_norm(std::span<const float> x, std::span<const float> weight,
                std::span<const float> bias, float eps, std::span<float> out);

// layer_norm of each `width`-element row; weight and bias as rms_norm_rows
// takes its weight (one row, or rows taken in turn).
void layer_norm_rows(std::span<const float> x, std::span<const float> weight,
                     std::span<const float> bias, float eps, std::span<float> out, size_t width);

}  // namespace cortiq::kernels
