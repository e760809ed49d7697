// Reference attention of one query row, with the roundings of the peer's
// non-flash path: kq = mul_mat(k, q), soft_max_ext(kq, mask, scale),
// kqv = mul_mat(v, kq).
#include "kernels/cpu/attention.hpp"

#include <algorithm>
#include <array>
#include <cassert>
#include <cmath>
#include <limits>

#include "base/fp16.hpp"
#include "kernels/cpu/matmul.hpp"

namespace cortiq::kernels {
namespace {

float round_to_f16(float x) {
  return fp16_to_fp32(fp32_to_fp16(x));
}

// q . k for an f16 key row: the query is rounded to f16 first (ggml's f16
// mat-mul converts its f32 operand to f16), so every product is exact in
// float. Same lane pattern as dot_f32.
float dot_f16_key(const float* q, const uint16_t* k, int64_t n) {
  constexpr int kLanes = 16;
  std::array<float, kLanes> lanes{};
  for (int64_t i = 0; i < n; ++i) lanes[i % kLanes] += round_to_f16(q[i]) * fp16_to_fp32(k[i]);
  for (int width = kLanes / 2; width > 0; width /= 2) {
    for (int j = 0; j < width; ++j) lanes[j] += lanes[j + width];
  }
  return lanes[0];
}

// Start of KV head kh of the row of position p.
const std::byte* head_of(const KvRowsView& rows, int64_t p, int64_t kh, int64_t head_dim) {
  const size_t element_bytes = rows.f16 ? sizeof(uint16_t) : sizeof(float);
  return rows.base + static_cast<size_t>(rows.cells[p]) * rows.row_bytes +
         static_cast<size_t>(kh * head_dim) * element_bytes;
}

float score(const float* q, const KvRowsView& keys, int64_t p, int64_t kh, int64_t head_dim) {
  const std::byte* k = head_of(keys, p, kh, head_dim);
  return keys.f16 ? dot_f16_key(q, reinterpret_cast<const uint16_t*>(k), head_dim)
                  : dot_f32(q, reinterpret_cast<const float*>(k), head_dim);
}

// scores -> probabilities in place: exp(s - max), summed in double, then
// multiplied by the reciprocal of the sum rounded to float (soft_max_f32).
void softmax(std::span<float> scores) {
  float max = -std::numeric_limits<float>::infinity();
  for (const float s : scores) max = std::max(max, s);
  double sum = 0.0;
  for (float& s : scores) {
    s = std::exp(s - max);
    sum += static_cast<double>(s);
  }
  const auto inv_sum = static_cast<float>(1.0 / sum);
  for (float& s : scores) s *= inv_sum;
}

// out += prob * v for each position in order; with an f16 cache the
// probabilities are rounded to f16 first, as the f16 mat-mul does.
void weighted_sum(std::span<const float> probs, const KvRowsView& values, int64_t kh,
                  int64_t head_dim, float* out) {
  std::fill(out, out + head_dim, 0.0f);
  for (size_t p = 0; p < probs.size(); ++p) {
    const std::byte* v = head_of(values, static_cast<int64_t>(p), kh, head_dim);
    if (values.f16) {
      const float prob = round_to_f16(probs[p]);
      const auto* row = reinterpret_cast<const uint16_t*>(v);
      for (int64_t d = 0; d < head_dim; ++d) out[d] += prob * fp16_to_fp32(row[d]);
    } else {
      const auto* row = reinterpret_cast<const float*>(v);
      for (int64_t d = 0; d < head_dim; ++d) out[d] += probs[p] * row[d];
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
  assert(scratch.size() >= static_cast<size_t>(n_kv));
  const int64_t group = shape.n_head / shape.n_head_kv;
  const std::span<float> probs = scratch.first(static_cast<size_t>(n_kv));
  for (int64_t h = 0; h < shape.n_head; ++h) {
    const int64_t kh = h / group;
    float* out_h = out.data() + h * shape.head_dim_v;
    if (n_kv == 0) {
      std::fill(out_h, out_h + shape.head_dim_v, 0.0f);
      continue;
    }
    const float* q_h = q.data() + h * shape.head_dim_k;
    // The scale multiplies the finished dot (soft_max_ext), not q.
    for (int64_t p = 0; p < n_kv; ++p) {
      probs[p] = score(q_h, keys, p, kh, shape.head_dim_k) * shape.scale;
    }
    softmax(probs);
    weighted_sum(probs, values, kh, shape.head_dim_v, out_h);
  }
}

}  // namespace cortiq::kernels
