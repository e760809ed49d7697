// Attention with the structure of the peer's non-flash path: kq =
// mul_mat(k, q), soft_max_ext(kq, mask, scale), kqv = mul_mat(v, kq), with
// the orders of operations of attention_simd.hpp.
//
// Work is organised by KV head: the query heads that share it, of every row
// computed together, form the query block of a tiled product with the key
// tiles (each cache row converted and transposed once for all of them),
// then share each value row in blocks of kMaxValueUnits. Each (row, head)
// keeps its own scores and output, computed in the same order as alone.
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

template <typename Element>
const Element* head_row(const HeadRows& rows, int64_t p) {
  return reinterpret_cast<const Element*>(
      rows.base + static_cast<size_t>(rows.cells[p]) * rows.row_bytes + rows.offset);
}

float to_f32(float x) {
  return x;
}
float to_f32(uint16_t h) {
  return fp16_to_fp32(h);
}

template <typename Element>
void transpose_keys(const HeadRows& rows, int64_t n, int64_t dim, float* kt) {
  std::fill_n(kt, dim * kKeyTile, 0.0f);
  for (int64_t j = 0; j < n; ++j) {
    const Element* k = head_row<Element>(rows, j);
    for (int64_t d = 0; d < dim; ++d) kt[d * kKeyTile + j] = to_f32(k[d]);
  }
}

void score_tile(const float* kt, const float* q, int64_t n_q, int64_t dim, float scale, float* out,
                int64_t out_stride) {
  for (int64_t u = 0; u < n_q; ++u, q += dim) {
    for (int64_t j = 0; j < kKeyTile; ++j) {
      float acc = 0.0f;
      for (int64_t d = 0; d < dim; ++d) acc += q[d] * kt[d * kKeyTile + j];
      out[u * out_stride + j] = acc * scale;
    }
  }
}

template <typename Element>
void weighted(const float* const* a, const int64_t* n_pos, int n_units, const HeadRows& rows,
              float* const* out, int64_t n) {
  for (int u = 0; u < n_units; ++u) {
    std::fill_n(out[u], n, 0.0f);
    for (int64_t p = 0; p < n_pos[u]; ++p) {
      const Element* v = head_row<Element>(rows, p);
      for (int64_t i = 0; i < n; ++i) out[u][i] += a[u][p] * to_f32(v[i]);
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

void softmax(float* s, int64_t n, bool round_to_f16) {
  float max = -std::numeric_limits<float>::infinity();
  for (int64_t p = 0; p < n; ++p) max = std::max(max, s[p]);
  const auto inv_sum = static_cast<float>(1.0 / exp_sum(s, n, max));
  for (int64_t p = 0; p < n; ++p) {
    s[p] *= inv_sum;
    if (round_to_f16) s[p] = fp16_to_fp32(fp32_to_fp16(s[p]));
  }
}

}  // namespace

// Products of fp16 values are exact: the plain score serves the f16 case.
const AttentionLoops kAttentionLoops{
    transpose_keys<float>, transpose_keys<uint16_t>, score_tile, score_tile,
    weighted<float>,       weighted<uint16_t>,       softmax};

}  // namespace scalar

const AttentionLoops& attention_loops() {
#if defined(__x86_64__)
  if (simd_level() >= SimdLevel::avx2) return avx2::kAttentionLoops;
#endif
  return scalar::kAttentionLoops;
}

namespace {

// Score rows are padded to whole key tiles.
int64_t score_stride(int64_t max_kv) {
  return (max_kv + kKeyTile - 1) / kKeyTile * kKeyTile;
}

// Scratch layout for n_rows rows of `group` heads each.
struct Scratch {
  float* scores;     // [row][head][score_stride]
  float* queries;    // [row][head][head_dim_k], rounded to f16 for an f16 cache
  float* keys;       // one transposed key tile, [head_dim_k][kKeyTile]
  uint16_t* halves;  // one query head as fp16
};

Scratch carve(std::span<float> scratch, const AttentionShape& shape, int64_t n_rows,
              int64_t max_kv) {
  const int64_t units = n_rows * (shape.n_head / shape.n_head_kv);
  Scratch s{};
  s.scores = scratch.data();
  s.queries = s.scores + units * score_stride(max_kv);
  s.keys = s.queries + units * shape.head_dim_k;
  s.halves = reinterpret_cast<uint16_t*>(s.keys + shape.head_dim_k * kKeyTile);
  return s;
}

// The loops for these head sizes: the SIMD ones take whole 8-element
// chunks; other sizes use the scalar ones (same order, so the same bits).
struct HeadLoops {
  decltype(AttentionLoops::transpose_keys_f32) transpose_keys;
  decltype(AttentionLoops::score_tile) score_tile;
  decltype(AttentionLoops::weighted_f32) weighted;
  decltype(AttentionLoops::softmax) softmax;
};

HeadLoops head_loops(const AttentionShape& shape, bool f16_keys, bool f16_values) {
  const AttentionLoops& simd = attention_loops();
  const AttentionLoops& k = shape.head_dim_k % 8 == 0 ? simd : scalar::kAttentionLoops;
  const AttentionLoops& v = shape.head_dim_v % 8 == 0 ? simd : scalar::kAttentionLoops;
  return {f16_keys ? k.transpose_keys_f16 : k.transpose_keys_f32,
          f16_keys ? k.score_tile_f16 : k.score_tile, f16_values ? v.weighted_f16 : v.weighted_f32,
          simd.softmax};
}

}  // namespace

size_t attention_scratch_floats(const AttentionShape& shape, int64_t n_rows, int64_t max_kv) {
  const int64_t units = n_rows * (shape.n_head / shape.n_head_kv);
  const int64_t stride = score_stride(max_kv);
  return static_cast<size_t>(units * (stride + shape.head_dim_k) +
                             shape.head_dim_k * (kKeyTile + 1));
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
  const int64_t stride = score_stride(max_kv);
  const Scratch s = carve(scratch, shape, n_rows, max_kv);
  const HeadLoops loops = head_loops(shape, keys.f16, values.f16);
  const size_t k_element = keys.f16 ? sizeof(uint16_t) : sizeof(float);
  const size_t v_element = values.f16 ? sizeof(uint16_t) : sizeof(float);
  auto query = [&](int64_t u) { return s.queries + u * dk; };
  auto scores = [&](int64_t u) { return s.scores + u * stride; };
  auto unit_kv = [&](int64_t u) { return n_kv[static_cast<size_t>(u / group)]; };

  for (int64_t kh = kv_begin; kh < kv_end; ++kh) {
    // The queries of this KV head, rounded to f16 for an f16 cache (as the
    // f16 mat-mul rounds its f32 operand).
    const auto dk_size = static_cast<size_t>(dk);
    for (int64_t u = 0; u < units; ++u) {
      const float* from = q.data() + (u / group) * q_width + (kh * group + u % group) * dk;
      if (keys.f16) {
        fp32_to_fp16_row({from, dk_size}, {s.halves, dk_size});
        fp16_to_fp32_row({s.halves, dk_size}, {query(u), dk_size});
      } else {
        std::copy_n(from, dk, query(u));
      }
    }
    // Scores, one key tile at a time for the runs of consecutive rows that
    // reach it (the scale multiplies the finished dot, as soft_max_ext).
    HeadRows key_rows{keys.base, keys.row_bytes, keys.cells.data(),
                      static_cast<size_t>(kh * dk) * k_element};
    for (int64_t p0 = 0; p0 < max_kv; p0 += kKeyTile) {
      key_rows.cells = keys.cells.data() + p0;
      loops.transpose_keys(key_rows, std::min(kKeyTile, max_kv - p0), dk, s.keys);
      for (int64_t r = 0; r < n_rows;) {
        if (p0 >= n_kv[static_cast<size_t>(r)]) {
          ++r;
          continue;
        }
        int64_t end = r + 1;
        while (end < n_rows && p0 < n_kv[static_cast<size_t>(end)]) ++end;
        loops.score_tile(s.keys, query(r * group), (end - r) * group, dk, shape.scale,
                         scores(r * group) + p0, stride);
        r = end;
      }
    }
    // With an f16 cache the probabilities are rounded to f16, as the f16
    // mat-mul does.
    for (int64_t u = 0; u < units; ++u) {
      if (unit_kv(u) > 0) loops.softmax(scores(u), unit_kv(u), values.f16);
    }
    // out = sum_p prob_p * v_p in position order, a few heads sharing each
    // value row.
    const HeadRows value_rows{values.base, values.row_bytes, values.cells.data(),
                              static_cast<size_t>(kh * dv) * v_element};
    for (int64_t u0 = 0; u0 < units; u0 += kMaxValueUnits) {
      const int n_units = static_cast<int>(std::min<int64_t>(kMaxValueUnits, units - u0));
      std::array<const float*, kMaxValueUnits> probs{};
      std::array<float*, kMaxValueUnits> outs{};
      std::array<int64_t, kMaxValueUnits> n_pos{};
      for (int i = 0; i < n_units; ++i) {
        const int64_t u = u0 + i;
        probs[i] = scores(u);
        n_pos[i] = unit_kv(u);
        outs[i] = out.data() + (u / group) * out_width + (kh * group + u % group) * dv;
      }
      loops.weighted(probs.data(), n_pos.data(), n_units, value_rows, outs.data(), dv);
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
