// RMS norm and layer norm with llama.cpp's roundings
// (ggml_compute_forward_rms_norm_f32, ggml_compute_forward_norm_f32).
#include "kernels/cpu/norm.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>

namespace cortiq::kernels {

void rms_norm(std::span<const float> x, std::span<const float> weight, float eps,
              std::span<float> out) {
  assert(out.size() == x.size());
  assert(weight.empty() || weight.size() == x.size());
  // Each square is rounded to float before it joins the double sum, and the
  // mean is rounded to float before eps is added, as in the peer.
  double sum = 0.0;
  for (const float v : x) sum += static_cast<double>(v * v);
  const auto mean = static_cast<float>(sum / static_cast<double>(x.size()));
  const float scale = 1.0f / std::sqrt(mean + eps);
  for (size_t i = 0; i < x.size(); ++i) out[i] = x[i] * scale;
  // The norm weight is a separate ggml_mul in the peer's graph: a second
  // rounding, not a fused x * (scale * w).
  if (!weight.empty()) {
    for (size_t i = 0; i < x.size(); ++i) out[i] *= weight[i];
  }
}

namespace {

// Row `row` of a weight of rows of `width` (empty stays empty).
std::span<const float> weight_row(std::span<const float> weight, size_t row, size_t width) {
  return weight.empty() ? weight : weight.subspan(row * width, width);
}

}  // namespace

void rms_norm_rows(std::span<const float> x, std::span<const float> weight, float eps,
                   std::span<float> out, size_t width) {
  assert(width > 0 && x.size() % width == 0 && out.size() == x.size());
  assert(weight.size() % width == 0);
  const size_t weight_rows = std::max<size_t>(weight.size() / width, 1);
  for (size_t start = 0, row = 0; start < x.size(); start += width, ++row) {
    rms_norm(x.subspan(start, width), weight_row(weight, row % weight_rows, width), eps,
             out.subspan(start, width));
  }
}

void l2_norm(std::span<float> x, float eps) {
  double sum = 0.0;
  for (const float v : x) sum += static_cast<double>(v * v);
  const float scale = 1.0f / std::fmax(std::sqrt(static_cast<float>(sum)), eps);
  for (float& v : x) v *= scale;
}

void layer_norm(std::span<const float> x, std::span<const float> weight,
                std::span<const float> bias, float eps, std::span<float> out) {
  assert(out.size() == x.size());
  assert(weight.empty() || weight.size() == x.size());
  assert(bias.empty() || bias.size() == x.size());
  const auto n = static_cast<double>(x.size());
  double sum = 0.0;
  for (const float v : x) sum += static_cast<double>(v);
  const float mean = static_cast<float>(sum) / static_cast<float>(x.size());
  double squares = 0.0;
  for (size_t i = 0; i < x.size(); ++i) {
    const float y = x[i] - mean;
    out[i] = y;
    squares += static_cast<double>(y * y);
  }
  const auto variance = static_cast<float>(squares / n);
  const float scale = 1.0f / std::sqrt(variance + eps);
  for (float& v : out) v *= scale;
  if (!weight.empty()) {
    for (size_t i = 0; i < out.size(); ++i) out[i] *= weight[i];
  }
  if (!bias.empty()) {
    for (size_t i = 0; i < out.size(); ++i) out[i] += bias[i];
  }
}

void layer_norm_rows(std::span<const float> x, std::span<const float> weight,
                     std::span<const float> bias, float eps, std::span<float> out, size_t width) {
  assert(width > 0 && x.size() % width == 0 && out.size() == x.size());
  assert(weight.size() % width == 0 && bias.size() % width == 0);
  const size_t weight_rows = std::max<size_t>(weight.size() / width, 1);
  const size_t bias_rows = std::max<size_t>(bias.size() / width, 1);
  for (size_t start = 0, row = 0; start < x.size(); start += width, ++row) {
    layer_norm(x.subspan(start, width), weight_row(weight, row % weight_rows, width),
               weight_row(bias, row % bias_rows, width), eps, out.subspan(start, width));
  }
}

}  // namespace cortiq::kernels
