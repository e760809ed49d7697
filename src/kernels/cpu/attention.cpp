// Attention with the roundings of the peer's non-flash path: kq =
// mul_mat(k, q), soft_max_ext(kq, mask, scale), kqv = mul_mat(v, kq).
//
// Work is organised by KV head: the query heads that share it, of every row
// computed together, meet each cache row while it is in registers or L1
// (one f16 -> f32 conversion serves them all). Each (row, head) keeps its
// own scores and output, computed in the same order as alone.
#include "kernels/cpu/attention.hpp"

#include <algorithm>
#include <array>
#include <cassert>
#include <cmath>
#include <limits>
#include <type_traits>

#include "base/cpu_features.hpp"
#include "base/fp16.hpp"
#include "kernels/cpu/activations.hpp"
#include "kernels/cpu/attention_simd.hpp"
#include "kernels/cpu/convert.hpp"
#include "kernels/cpu/matmul.hpp"

namespace cortiq::kernels {

namespace scalar {
namespace {

void dot_rows(const float* k, const float* q, int64_t n_q, int64_t n, float scale, float* out,
              int64_t out_stride) {
  for (int64_t u = 0; u < n_q; ++u) out[u * out_stride] = scalar::dot_f32(q + u * n, k, n) * scale;
}

template <typename Element>
void weighted(const float* a, int64_t n_pos, const std::byte* base, size_t row_bytes,
              const int32_t* cells, size_t offset, float* out, int64_t n) {
  std::fill_n(out, n, 0.0f);
  for (int64_t p = 0; p < n_pos; ++p) {
    const auto* v =
        reinterpret_cast<const Element*>(base + static_cast<size_t>(cells[p]) * row_bytes + offset);
    for (int64_t i = 0; i < n; ++i) {
      if constexpr (std::is_same_v<Element, uint16_t>) {
        out[i] += a[p] * fp16_to_fp32(v[i]);
      } else {
        out[i] += a[p] * v[i];
      }
    }
  }
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

// Products of fp16 values are exact: the plain dot serves the f16 case.
const AttentionLoops kAttentionLoops{dot_rows, dot_rows, weighted<float>, weighted<uint16_t>,
                                     exp_sum};

}  // namespace scalar

const AttentionLoops& attention_loops() {
#if defined(__x86_64__)
  if (simd_level() >= SimdLevel::avx2) return avx2::kAttentionLoops;
#endif
  return scalar::kAttentionLoops;
}

namespace {

float round_to_f16(float x) {
  return fp16_to_fp32(fp32_to_fp16(x));
}

// KV head kh of position p's cache row as f32: in place for an f32 cache,
// converted into buf for f16.
const float* head_row(const KvRowsView& rows, int64_t p, int64_t kh, int64_t head_dim, float* buf) {
  const size_t element_bytes = rows.f16 ? sizeof(uint16_t) : sizeof(float);
  const std::byte* at = rows.base + static_cast<size_t>(rows.cells[p]) * rows.row_bytes +
                        static_cast<size_t>(kh * head_dim) * element_bytes;
  if (!rows.f16) return reinterpret_cast<const float*>(at);
  const auto n = static_cast<size_t>(head_dim);
  fp16_to_fp32_row({reinterpret_cast<const uint16_t*>(at), n}, {buf, n});
  return buf;
}

// scores -> probabilities in place: exp(s - max) summed as the peer does,
// then multiplied by the reciprocal of the sum rounded to float.
void softmax(float* scores, int64_t n, const AttentionLoops& loops) {
  float max = -std::numeric_limits<float>::infinity();
  for (int64_t p = 0; p < n; ++p) max = std::max(max, scores[p]);
  const auto inv_sum = static_cast<float>(1.0 / loops.exp_sum(scores, n, max));
  for (int64_t p = 0; p < n; ++p) scores[p] *= inv_sum;
}

// Scratch layout for n_rows rows of `group` heads each.
struct Scratch {
  float* scores;     // [row][head][max_kv]
  float* queries;    // [row][head][head_dim_k], rounded to f16 for an f16 cache
  float* row;        // one converted cache row
  uint16_t* halves;  // max_kv fp16 values (probabilities rounded through f16)
};

Scratch carve(std::span<float> scratch, const AttentionShape& shape, int64_t n_rows,
              int64_t max_kv) {
  const int64_t group = shape.n_head / shape.n_head_kv;
  float* at = scratch.data();
  Scratch s{at, at + n_rows * group * max_kv, nullptr, nullptr};
  s.row = s.queries + n_rows * group * shape.head_dim_k;
  s.halves = reinterpret_cast<uint16_t*>(s.row + std::max(shape.head_dim_k, shape.head_dim_v));
  return s;
}

}  // namespace

size_t attention_scratch_floats(const AttentionShape& shape, int64_t n_rows, int64_t max_kv) {
  const int64_t group = shape.n_head / shape.n_head_kv;
  return static_cast<size_t>(n_rows * group * (max_kv + shape.head_dim_k) +
                             std::max(shape.head_dim_k, shape.head_dim_v) + max_kv);
}

void attention_rows(std::span<const float> q, std::span<const int64_t> n_kv, const KvRowsView& keys,
                    const KvRowsView& values, const AttentionShape& shape, std::span<float> out,
                    std::span<float> scratch, int64_t kv_begin, int64_t kv_end) {
  assert(shape.n_head_kv > 0 && shape.n_head % shape.n_head_kv == 0);
  assert(0 <= kv_begin && kv_begin <= kv_end && kv_end <= shape.n_head_kv);
  const auto n_rows = static_cast<int64_t>(n_kv.size());
  const int64_t dk = shape.head_dim_k, dv = shape.head_dim_v;
  const int64_t q_width = shape.n_head * dk, out_width = shape.n_head * dv;
  assert(q.size() == static_cast<size_t>(n_rows * q_width));
  assert(out.size() == static_cast<size_t>(n_rows * out_width));
  const int64_t max_kv = n_rows == 0 ? 0 : *std::max_element(n_kv.begin(), n_kv.end());
  assert(static_cast<size_t>(max_kv) <= keys.cells.size() &&
         static_cast<size_t>(max_kv) <= values.cells.size());
  assert(scratch.size() >= attention_scratch_floats(shape, n_rows, max_kv));
  const int64_t group = shape.n_head / shape.n_head_kv;
  const int64_t units = n_rows * group;  // (row, head) pairs of one KV head
  const Scratch s = carve(scratch, shape, n_rows, max_kv);
  // The SIMD loops take whole 16- (dot) and 8-element (axpy) chunks; other
  // head sizes use the scalar ones (same order, so the same bits).
  const AttentionLoops& loops = attention_loops();
  const AttentionLoops& plain = scalar::kAttentionLoops;
  const auto dot_rows = dk % 16 != 0 ? plain.dot_rows
                        : keys.f16   ? loops.dot_rows_f16
                                     : loops.dot_rows;
  const auto weighted = dv % 8 != 0  ? (values.f16 ? plain.weighted_f16 : plain.weighted_f32)
                        : values.f16 ? loops.weighted_f16
                                     : loops.weighted_f32;
  const size_t v_element = values.f16 ? sizeof(uint16_t) : sizeof(float);
  // Runs of consecutive rows that attend to position p.
  auto for_each_run = [&](int64_t p, auto&& fn) {
    for (int64_t r = 0; r < n_rows;) {
      if (p >= n_kv[static_cast<size_t>(r)]) {
        ++r;
        continue;
      }
      int64_t end = r + 1;
      while (end < n_rows && p < n_kv[static_cast<size_t>(end)]) ++end;
      fn(r, end);
      r = end;
    }
  };

  for (int64_t kh = kv_begin; kh < kv_end; ++kh) {
    auto query = [&](int64_t u) { return s.queries + u * dk; };
    auto scores = [&](int64_t u) { return s.scores + u * max_kv; };
    for (int64_t u = 0; u < units; ++u) {
      const float* from = q.data() + (u / group) * q_width + (kh * group + u % group) * dk;
      for (int64_t i = 0; i < dk; ++i) query(u)[i] = keys.f16 ? round_to_f16(from[i]) : from[i];
    }
    // Scores: the scale multiplies the finished dot (soft_max_ext), not q.
    for (int64_t p = 0; p < max_kv; ++p) {
      const float* k = head_row(keys, p, kh, dk, s.row);
      for_each_run(p, [&](int64_t r, int64_t end) {
        dot_rows(k, query(r * group), (end - r) * group, dk, shape.scale, scores(r * group) + p,
                 max_kv);
      });
    }
    for (int64_t u = 0; u < units; ++u) {
      const int64_t n = n_kv[static_cast<size_t>(u / group)];
      softmax(scores(u), n, loops);
      // With an f16 cache the probabilities are rounded to f16, as the f16
      // mat-mul does.
      if (values.f16 && n > 0) {
        const auto count = static_cast<size_t>(n);
        fp32_to_fp16_row({scores(u), count}, {s.halves, count});
        fp16_to_fp32_row({s.halves, count}, {scores(u), count});
      }
    }
    // out = sum_p prob_p * v_p in position order, each output dimension
    // accumulated in a register over all positions.
    for (int64_t u = 0; u < units; ++u) {
      float* o = out.data() + (u / group) * out_width + (kh * group + u % group) * dv;
      weighted(scores(u), n_kv[static_cast<size_t>(u / group)], values.base, values.row_bytes,
               values.cells.data(), static_cast<size_t>(kh * dv) * v_element, o, dv);
    }
  }
}

void attention_row(std::span<const float> q, const KvRowsView& keys, const KvRowsView& values,
                   int64_t n_kv, const AttentionShape& shape, std::span<float> out,
                   std::span<float> scratch) {
  const int64_t counts[] = {n_kv};
  attention_rows(q, counts, keys, values, shape, out, scratch, 0, shape.n_head_kv);
}

}  // namespace cortiq::kernels
