// Attention with the structure of llama.cpp's non-flash path (build_attn_mha
// in llama-graph.cpp): kq = mul_mat(k, q), the softcap's scale/tanh/scale,
// soft_max_ext(kq, mask, sinks, scale, max_bias), kqv = mul_mat(v, kq), with
// the orders of operations of attention_simd.hpp.
//
// Work is organised by KV head: the query heads that share it, of every row
// computed together, form the query block of a tiled product with the key
// tiles (each cache row converted and transposed once for all of them),
// then share each value row in blocks of kMaxValueUnits. Each (row, head)
// keeps its own scores and output, computed in the same order as alone.
// The key tiles start at the first position any row of the call attends to
// (rows of a tile may start at different positions): each row's softmax and
// value sum then take only its own positions, so a row whose window starts
// later never sees the scores the tile computed before it.
#include "kernels/cpu/attention.hpp"

#include <math.h>  // expf, tanhf, powf: the C library functions ggml calls

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
void weighted_range(const float* const* a, const int64_t* begin, const int64_t* end, int n_units,
                    const HeadRows& rows, float* const* out, int64_t n) {
  for (int u = 0; u < n_units; ++u) {
    std::fill_n(out[u], n, 0.0f);
    for (int64_t p = begin[u]; p < end[u]; ++p) {
      const Element* v = head_row<Element>(rows, p);
      for (int64_t i = 0; i < n; ++i) out[u][i] += a[u][p] * to_f32(v[i]);
    }
  }
}

template <typename Element>
void weighted(const float* const* a, const int64_t* n_pos, int n_units, const HeadRows& rows,
              float* const* out, int64_t n) {
  const std::array<int64_t, kMaxValueUnits> from_zero{};
  weighted_range<Element>(a, from_zero.data(), n_pos, n_units, rows, out, n);
}

// The groups of 8 lanes start `lead` lanes before s[0]: the group at i
// holds s[i..i+8), the lanes outside [0, n) being 0.
double exp_sum(float* s, int64_t n, int64_t lead, float max) {
  double sum = 0.0;
  for (int64_t i = -lead; i < n; i += 8) {
    std::array<float, 8> v{};
    for (int64_t j = 0; j < 8 && i + j < n; ++j) {
      if (i + j >= 0) v[j] = s[i + j] = exp_approx(s[i + j] - max);
    }
    sum += static_cast<double>(((v[0] + v[4]) + (v[2] + v[6])) + ((v[1] + v[5]) + (v[3] + v[7])));
  }
  return sum;
}

void softmax_window(float* s, int64_t n, int64_t lead, const float* sink, bool round_to_f16) {
  float max = -std::numeric_limits<float>::infinity();
  for (int64_t p = 0; p < n; ++p) max = std::max(max, s[p]);
  if (sink != nullptr) max = max > *sink ? max : *sink;
  double sum = exp_sum(s, n, lead, max);
  if (sink != nullptr) sum += static_cast<double>(::expf(*sink - max));
  const auto inv_sum = static_cast<float>(1.0 / sum);
  for (int64_t p = 0; p < n; ++p) {
    s[p] *= inv_sum;
    if (round_to_f16) s[p] = fp16_to_fp32(fp32_to_fp16(s[p]));
  }
}

void softmax(float* s, int64_t n, bool round_to_f16) {
  softmax_window(s, n, 0, nullptr, round_to_f16);
}

}  // namespace

// Products of fp16 values are exact: the plain score serves the f16 case.
const AttentionLoops kAttentionLoops{transpose_keys<float>,
                                     transpose_keys<uint16_t>,
                                     score_tile,
                                     score_tile,
                                     weighted_range<float>,
                                     weighted_range<uint16_t>,
                                     weighted<float>,
                                     weighted<uint16_t>,
                                     softmax_window,
                                     softmax};

}  // namespace scalar

const AttentionLoops& attention_loops_of(SimdLevel level) {
#if defined(__x86_64__)
  if (level == SimdLevel::avx512) {
    // Built here, in baseline code: AVX-512's tiles, AVX2's transposes and
    // softmax.
    static const AttentionLoops loops = [] {
      AttentionLoops l = avx512::kAttentionLoops;
      l.transpose_keys_f32 = avx2::kAttentionLoops.transpose_keys_f32;
      l.transpose_keys_f16 = avx2::kAttentionLoops.transpose_keys_f16;
      l.softmax_window = avx2::kAttentionLoops.softmax_window;
      l.softmax = avx2::kAttentionLoops.softmax;
      return l;
    }();
    return loops;
  }
  if (level == SimdLevel::avx2) return avx2::kAttentionLoops;
#endif
  return scalar::kAttentionLoops;
}

const AttentionLoops& attention_loops() {
  const SimdLevel level = simd_level();
  return attention_loops_of(level >= SimdLevel::avx512 ? SimdLevel::avx512
                            : level >= SimdLevel::avx2 ? SimdLevel::avx2
                                                       : SimdLevel::scalar);
}

namespace {

// Asks for the cache lines of one head's rows (`bytes` bytes each) of the
// first n positions of `rows`: a head reads a narrow slice of rows that lie
// a whole cache row apart, through the cell table, a pattern the hardware
// prefetchers follow poorly (decode at depth 4096 spent most of its
// attention time waiting for these lines).
void prefetch_rows(const HeadRows& rows, int64_t n, int64_t bytes) {
  for (int64_t p = 0; p < n; ++p) {
    const std::byte* row = head_row<std::byte>(rows, p);
    for (int64_t at = 0; at < bytes; at += 64) __builtin_prefetch(row + at);
  }
}

// Score rows are padded to whole key tiles.
int64_t score_stride(int64_t positions) {
  return (positions + kKeyTile - 1) / kKeyTile * kKeyTile;
}

// Scratch layout for n_rows rows of `group` heads each.
struct Scratch {
  float* scores;     // [row][head][score_stride], from the call's first position
  float* queries;    // [row][head][head_dim_k], rounded to f16 for an f16 cache
  float* keys;       // one transposed key tile, [head_dim_k][kKeyTile]
  uint16_t* halves;  // one query head as fp16
};

Scratch carve(std::span<float> scratch, const AttentionShape& shape, int64_t n_rows,
              int64_t positions) {
  const int64_t units = n_rows * (shape.n_head / shape.n_head_kv);
  Scratch s{};
  s.scores = scratch.data();
  s.queries = s.scores + units * score_stride(positions);
  s.keys = s.queries + units * shape.head_dim_k;
  s.halves = reinterpret_cast<uint16_t*>(s.keys + shape.head_dim_k * kKeyTile);
  return s;
}

// The loops for these head sizes: the SIMD ones take whole 8-element
// chunks; other sizes use the scalar ones (same order, so the same bits).
struct HeadLoops {
  decltype(AttentionLoops::transpose_keys_f32) transpose_keys;
  decltype(AttentionLoops::score_tile) score_tile;
  decltype(AttentionLoops::weighted_range_f32) weighted;
  decltype(AttentionLoops::softmax_window) softmax;
};

HeadLoops head_loops(const AttentionShape& shape, bool f16_keys, bool f16_values) {
  const AttentionLoops& simd = attention_loops();
  const AttentionLoops& k = shape.head_dim_k % 8 == 0 ? simd : scalar::kAttentionLoops;
  const AttentionLoops& v = shape.head_dim_v % 8 == 0 ? simd : scalar::kAttentionLoops;
  return {f16_keys ? k.transpose_keys_f16 : k.transpose_keys_f32,
          f16_keys ? k.score_tile_f16 : k.score_tile,
          f16_values ? v.weighted_range_f16 : v.weighted_range_f32, simd.softmax_window};
}

// What llama.cpp does to the product's scores of one (row, head) at
// positions [begin, end) (s[0] is position begin) before the softmax, the
// tiles having multiplied each dot by 1/softcap (or softcap_scale) when
// there is a softcap (else by the scale):
// - the softcap (build_attn_mha): kq = tanhf(kq) * softcap, then
//   soft_max_ext's kq * scale;
// - ALiBi: soft_max_ext's wp[i] += slope * mask[i], the mask holding
//   float(-|key_pos - query_pos|) (set_input_kq_mask in llama-kv-cache.cpp).
//   The peer compiles ggml with -march=native and GNU C++, where GCC
//   contracts that line into one FMA (vfmadd in ggml_compute_forward_soft_max
//   of its libggml-cpu.so): s = fma(slope, mask, s), one rounding.
void finish_scores(float* s, int64_t begin, int64_t end, const AttentionShape& shape, float slope) {
  const bool softcap = shape.softcap > 0.0f, alibi = shape.alibi_max_bias > 0.0f;
  const int64_t query_pos = end - 1;
  for (int64_t p = begin; p < end; ++p) {
    float x = s[p - begin];
    if (softcap) x = (::tanhf(x) * shape.softcap) * shape.scale;
    if (alibi) x = std::fma(slope, static_cast<float>(-(query_pos - p)), x);
    s[p - begin] = x;
  }
}

}  // namespace

// ALiBi's slope for query head h, as ggml's soft_max_ext computes it
// (ggml_compute_forward_soft_max_f32 in ggml-cpu/ops.cpp), types included.
float alibi_slope(float max_bias, int64_t n_head, int64_t h) {
  const auto heads = static_cast<uint32_t>(n_head);
  const uint32_t n_head_log2 = 1u << static_cast<uint32_t>(std::floor(std::log2(heads)));
  const float m0 = ::powf(2.0f, -(max_bias) / static_cast<float>(n_head_log2));
  const float m1 = ::powf(2.0f, -(max_bias / 2.0f) / static_cast<float>(n_head_log2));
  const auto head = static_cast<uint32_t>(h);
  return head < n_head_log2 ? ::powf(m0, static_cast<float>(head + 1))
                            : ::powf(m1, static_cast<float>(2 * (head - n_head_log2) + 1));
}

size_t attention_scratch_floats(const AttentionShape& shape, int64_t n_rows,
                                int64_t max_positions) {
  const int64_t units = n_rows * (shape.n_head / shape.n_head_kv);
  const int64_t stride = score_stride(max_positions);
  return static_cast<size_t>(units * (stride + shape.head_dim_k) +
                             shape.head_dim_k * (kKeyTile + 1));
}

void attention_rows(std::span<const float> q, std::span<const int64_t> kv_start,
                    std::span<const int64_t> n_kv, const KvRowsView& keys, const KvRowsView& values,
                    const AttentionShape& shape, std::span<float> out, std::span<float> scratch,
                    int64_t kv_begin, int64_t kv_end) {
  assert(shape.n_head_kv > 0 && shape.n_head % shape.n_head_kv == 0);
  assert(0 <= kv_begin && kv_begin <= kv_end && kv_end <= shape.n_head_kv);
  assert(kv_start.empty() || kv_start.size() == n_kv.size());
  assert(shape.sinks.empty() || shape.sinks.size() == static_cast<size_t>(shape.n_head));
  const auto n_rows = static_cast<int64_t>(n_kv.size());
  const int64_t dk = shape.head_dim_k, dv = shape.head_dim_v;
  const int64_t q_width = shape.n_head * dk, out_width = shape.n_head * dv;
  assert(q.size() == static_cast<size_t>(n_rows * q_width));
  assert(out.size() == static_cast<size_t>(n_rows * out_width));
  auto row_begin = [&](int64_t r) {
    return kv_start.empty() ? 0 : kv_start[static_cast<size_t>(r)];
  };
  auto row_end = [&](int64_t r) { return n_kv[static_cast<size_t>(r)]; };
  // The positions the rows read, [first, last): nothing below the first
  // position of every row is loaded.
  int64_t first = std::numeric_limits<int64_t>::max(), last = 0;
  for (int64_t r = 0; r < n_rows; ++r) {
    assert(0 <= row_begin(r) && row_begin(r) <= row_end(r));
    if (row_begin(r) == row_end(r)) continue;
    first = std::min(first, row_begin(r));
    last = std::max(last, row_end(r));
  }
  if (last == 0) first = 0;  // no row has a position
  const int64_t positions = last - first;
  assert(static_cast<size_t>(last) <= keys.cells.size() &&
         static_cast<size_t>(last) <= values.cells.size());
  assert(scratch.size() >= attention_scratch_floats(shape, n_rows, positions));
  const int64_t group = shape.n_head / shape.n_head_kv;
  const int64_t units = n_rows * group;  // (row, head) pairs of one KV head
  const int64_t stride = score_stride(positions);
  const Scratch s = carve(scratch, shape, n_rows, positions);
  const HeadLoops loops = head_loops(shape, keys.f16, values.f16);
  const size_t k_element = keys.f16 ? sizeof(uint16_t) : sizeof(float);
  const size_t v_element = values.f16 ? sizeof(uint16_t) : sizeof(float);
  const bool finish = shape.softcap > 0.0f || shape.alibi_max_bias > 0.0f;
  // With a softcap the dot is first multiplied by 1/softcap (or the
  // family's softcap_scale: ggml_scale); without, the scale multiplies the
  // finished dot, as soft_max_ext.
  const float tile_scale =
      shape.softcap > 0.0f
          ? (shape.softcap_scale != 0.0f ? shape.softcap_scale : 1.0f / shape.softcap)
          : shape.scale;
  auto query = [&](int64_t u) { return s.queries + u * dk; };
  // Score j of a row is position first + j.
  auto scores = [&](int64_t u) { return s.scores + u * stride; };
  // Whether row r has positions in [p0, p1).
  auto reaches = [&](int64_t r, int64_t p0, int64_t p1) {
    const int64_t begin = row_begin(r), end = row_end(r);
    return begin < end && begin < p1 && p0 < end;
  };

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
    // reach it; a tile no row reaches is not loaded.
    HeadRows key_rows{keys.base, keys.row_bytes, keys.cells.data(),
                      static_cast<size_t>(kh * dk) * k_element};
    const auto k_bytes = static_cast<int64_t>(k_element) * dk;
    for (int64_t j0 = 0; j0 < positions; j0 += kKeyTile) {
      const int64_t p0 = first + j0, p1 = std::min(p0 + kKeyTile, last);
      HeadRows next_tile = key_rows;  // the tile after this one
      next_tile.cells = keys.cells.data() + p1;
      prefetch_rows(next_tile, std::min(p1 + kKeyTile, last) - p1, k_bytes);
      bool loaded = false;
      for (int64_t r = 0; r < n_rows;) {
        if (!reaches(r, p0, p1)) {
          ++r;
          continue;
        }
        if (!loaded) {
          key_rows.cells = keys.cells.data() + p0;
          loops.transpose_keys(key_rows, p1 - p0, dk, s.keys);
          loaded = true;
        }
        int64_t end = r + 1;
        while (end < n_rows && reaches(end, p0, p1)) ++end;
        loops.score_tile(s.keys, query(r * group), (end - r) * group, dk, tile_scale,
                         scores(r * group) + j0, stride);
        r = end;
      }
    }
    // Each (row, head) over its own positions: the softcap and ALiBi, then
    // the softmax, whose 8-lane groups keep the alignment of positions (as
    // if the positions before the window were masked to -inf). With an f16
    // cache the probabilities are rounded to f16, as the f16 mat-mul does.
    for (int64_t u = 0; u < units; ++u) {
      const int64_t r = u / group, h = kh * group + u % group;
      const int64_t begin = row_begin(r), end = row_end(r);
      if (begin == end) continue;
      float* row = scores(u) + (begin - first);
      if (finish) {
        const float slope =
            shape.alibi_max_bias > 0.0f ? alibi_slope(shape.alibi_max_bias, shape.n_head, h) : 0.0f;
        finish_scores(row, begin, end, shape, slope);
      }
      const float* sink = shape.sinks.empty() ? nullptr : &shape.sinks[static_cast<size_t>(h)];
      loops.softmax(row, end - begin, begin % 8, sink, values.f16);
    }
    // out = sum_p prob_p * v_p in position order, a few heads sharing each
    // value row.
    const HeadRows value_rows{values.base, values.row_bytes, values.cells.data() + first,
                              static_cast<size_t>(kh * dv) * v_element};
    for (int64_t u0 = 0; u0 < units; u0 += kMaxValueUnits) {
      const int n_units = static_cast<int>(std::min<int64_t>(kMaxValueUnits, units - u0));
      std::array<const float*, kMaxValueUnits> probs{};
      std::array<float*, kMaxValueUnits> outs{};
      std::array<int64_t, kMaxValueUnits> begins{}, ends{};
      for (int i = 0; i < n_units; ++i) {
        const int64_t u = u0 + i, r = u / group;
        probs[i] = scores(u);
        if (row_begin(r) < row_end(r)) {
          begins[i] = row_begin(r) - first;
          ends[i] = row_end(r) - first;
        }
        outs[i] = out.data() + r * out_width + (kh * group + u % group) * dv;
      }
      loops.weighted(probs.data(), begins.data(), ends.data(), n_units, value_rows, outs.data(),
                     dv);
    }
  }
}

void attention_rows(std::span<const float> q, std::span<const int64_t> n_kv, const KvRowsView& keys,
                    const KvRowsView& values, const AttentionShape& shape, std::span<float> out,
                    std::span<float> scratch, int64_t kv_begin, int64_t kv_end) {
  attention_rows(q, {}, n_kv, keys, values, shape, out, scratch, kv_begin, kv_end);
}

void attention_row(std::span<const float> q, const KvRowsView& keys, const KvRowsView& values,
                   int64_t kv_start, int64_t n_kv, const AttentionShape& shape,
                   std::span<float> out, std::span<float> scratch) {
  const int64_t starts[] = {kv_start};
  const int64_t counts[] = {n_kv};
  attention_rows(q, starts, counts, keys, values, shape, out, scratch, 0, shape.n_head_kv);
}

void attention_row(std::span<const float> q, const KvRowsView& keys, const KvRowsView& values,
                   int64_t n_kv, const AttentionShape& shape, std::span<float> out,
                   std::span<float> scratch) {
  attention_row(q, keys, values, 0, n_kv, shape, out, scratch);
}

}  // namespace cortiq::kernels
