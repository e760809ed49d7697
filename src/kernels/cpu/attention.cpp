// Attention of one query row, with the roundings of the peer's non-flash
// path: kq = mul_mat(k, q), soft_max_ext(kq, mask, scale), kqv =
// mul_mat(v, kq). The inner loops come per SIMD level (attention_simd.hpp).
#include "kernels/cpu/attention.hpp"

#include <algorithm>
#include <array>
#include <cassert>
#include <cmath>
#include <limits>

#include "base/cpu_features.hpp"
#include "base/fp16.hpp"
#include "kernels/cpu/activations.hpp"
#include "kernels/cpu/attention_simd.hpp"
#include "kernels/cpu/matmul.hpp"

namespace cortiq::kernels {

namespace scalar {
namespace {

float dot_f16(const float* q, const uint16_t* k, int64_t n) {
  constexpr int kLanes = 16;
  std::array<float, kLanes> lanes{};
  for (int64_t i = 0; i < n; ++i) lanes[i % kLanes] += q[i] * fp16_to_fp32(k[i]);
  for (int width = kLanes / 2; width > 0; width /= 2) {
    for (int j = 0; j < width; ++j) lanes[j] += lanes[j + width];
  }
  return lanes[0];
}

void axpy_f16(float a, const uint16_t* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += a * fp16_to_fp32(x[i]);
}

void axpy_f32(float a, const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

double exp_sum(float* s, int64_t n, float max) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; i += 8) {
    std::array<float, 8> v{};
    for (int64_t j = 0; j < 8 && i + j < n; ++j) v[j] = s[i + j] = exp_approx(s[i + j] - max);
    sum += static_cast<double>(((v[0] + v[4]) + (v[2] + v[6])) + ((v[1] + v[5]) + (v[3] + v[7])));
  }
  return sum;
}

}  // namespace

const AttentionLoops kAttentionLoops{dot_f16, axpy_f16, axpy_f32, exp_sum};

}  // namespace scalar

const AttentionLoops& attention_loops() {
#if defined(__x86_64__)
  if (simd_level() >= SimdLevel::avx2) return avx2::kAttentionLoops;
#endif
  return scalar::kAttentionLoops;
}

namespace {

// Start of KV head kh of the row of position p.
const std::byte* head_of(const KvRowsView& rows, int64_t p, int64_t kh, int64_t head_dim) {
  const size_t element_bytes = rows.f16 ? sizeof(uint16_t) : sizeof(float);
  return rows.base + static_cast<size_t>(rows.cells[p]) * rows.row_bytes +
         static_cast<size_t>(kh * head_dim) * element_bytes;
}

// The SIMD loops take whole 16-element chunks; other head sizes use the
// scalar ones (same order, so the same bits either way).
const AttentionLoops& loops_for(int64_t head_dim) {
  return head_dim % 16 == 0 ? attention_loops() : scalar::kAttentionLoops;
}

// scores[p] = (q . k_p) * scale. With an f16 cache the query is rounded to
// f16 first (ggml's f16 mat-mul converts its f32 operand), so every product
// is exact in float.
void scores_of(const float* q, const KvRowsView& keys, int64_t n_kv, int64_t kh, int64_t head_dim,
               float scale, float* q16, std::span<float> scores) {
  const AttentionLoops& loops = loops_for(head_dim);
  if (keys.f16) {
    for (int64_t i = 0; i < head_dim; ++i) q16[i] = fp16_to_fp32(fp32_to_fp16(q[i]));
  }
  for (int64_t p = 0; p < n_kv; ++p) {
    const std::byte* k = head_of(keys, p, kh, head_dim);
    // The scale multiplies the finished dot (soft_max_ext), not q.
    scores[p] = (keys.f16 ? loops.dot_f16(q16, reinterpret_cast<const uint16_t*>(k), head_dim)
                          : dot_f32(q, reinterpret_cast<const float*>(k), head_dim)) *
                scale;
  }
}

// scores -> probabilities in place: exp(s - max) summed as the peer does,
// then multiplied by the reciprocal of the sum rounded to float.
void softmax(std::span<float> scores) {
  float max = -std::numeric_limits<float>::infinity();
  for (const float s : scores) max = std::max(max, s);
  const double sum =
      attention_loops().exp_sum(scores.data(), static_cast<int64_t>(scores.size()), max);
  const auto inv_sum = static_cast<float>(1.0 / sum);
  for (float& s : scores) s *= inv_sum;
}

// out = sum_p prob_p * v_p, positions in order; with an f16 cache the
// probabilities are rounded to f16 first, as the f16 mat-mul does.
void weighted_sum(std::span<const float> probs, const KvRowsView& values, int64_t kh,
                  int64_t head_dim, float* out) {
  const AttentionLoops& loops = loops_for(head_dim);
  std::fill(out, out + head_dim, 0.0f);
  for (size_t p = 0; p < probs.size(); ++p) {
    const std::byte* v = head_of(values, static_cast<int64_t>(p), kh, head_dim);
    if (values.f16) {
      loops.axpy_f16(fp16_to_fp32(fp32_to_fp16(probs[p])), reinterpret_cast<const uint16_t*>(v),
                     out, head_dim);
    } else {
      loops.axpy_f32(probs[p], reinterpret_cast<const float*>(v), out, head_dim);
    }
  }
}

}  // namespace

void attention_row(std::span<const float> q, const KvRowsView& keys, const KvRowsView& values,
                   int64_t n_kv, const AttentionShape& shape, std::span<float> out,
                   std::span<float> scratch) {
  assert(shape.n_head_kv > 0 && shape.n_head % shape.n_head_kv == 0);
  assert(q.size() == static_cast<size_t>(shape.n_head * shape.head_dim_k));
  assert(out.size() == static_cast<size_t>(shape.n_head * shape.head_dim_v));
  assert(n_kv >= 0 && static_cast<size_t>(n_kv) <= keys.cells.size() &&
         static_cast<size_t>(n_kv) <= values.cells.size());
  assert(scratch.size() >= static_cast<size_t>(n_kv + shape.head_dim_k));
  const int64_t group = shape.n_head / shape.n_head_kv;
  const std::span<float> probs = scratch.first(static_cast<size_t>(n_kv));
  float* q16 = scratch.data() + n_kv;
  for (int64_t h = 0; h < shape.n_head; ++h) {
    const int64_t kh = h / group;
    float* out_h = out.data() + h * shape.head_dim_v;
    if (n_kv == 0) {
      std::fill(out_h, out_h + shape.head_dim_v, 0.0f);
      continue;
    }
    scores_of(q.data() + h * shape.head_dim_k, keys, n_kv, kh, shape.head_dim_k, shape.scale, q16,
              probs);
    softmax(probs);
    weighted_sum(probs, values, kh, shape.head_dim_v, out_h);
  }
}

}  // namespace cortiq::kernels
