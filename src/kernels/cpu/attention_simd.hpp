// The inner loops of attention, per SIMD level. The scalar versions define
// the order of operations; the AVX2 ones give the same bits.
//
// The order is the one a register-blocked tile computes naturally:
// - a score is one chain over the head dimension, s = (((q0 k0 + q1 k1) +
//   q2 k2) + ...) * scale (multiply, then add), so a block of queries times
//   a block of keys transposed to [dim][position] keeps one accumulator per
//   (query, position) in a register lane;
// - an output element is one chain over the positions, o_i = ((p0 v0_i +
//   p1 v1_i) + ...), so a block of query heads shares each value row.
// Every (query, position) score and every output element is computed the
// same way whatever else is in the block: a row's result never depends on
// the rows computed with it. A head's output chain starts at its own first
// position, whatever positions the other heads of the block begin at.
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/cpu_features.hpp"

namespace cortiq::kernels {

// Positions per transposed key tile (two AVX2 registers).
inline constexpr int64_t kKeyTile = 16;
// Query heads that share one pass over the value rows.
inline constexpr int kMaxValueUnits = 4;

// Cache rows of one KV head: position j's row starts at base + cells[j] *
// row_bytes + offset, f32 or f16 elements.
struct HeadRows {
  const std::byte* base = nullptr;
  size_t row_bytes = 0;
  const int32_t* cells = nullptr;
  size_t offset = 0;
};

struct AttentionLoops {
  // The keys of n <= kKeyTile positions (rows.cells[0..n)) as f32,
  // transposed: kt[d * kKeyTile + j] = k_j[d] for d < dim; lanes j >= n are
  // 0. SIMD levels need dim a multiple of 8.
  void (*transpose_keys_f32)(const HeadRows& rows, int64_t n, int64_t dim, float* kt);
  void (*transpose_keys_f16)(const HeadRows& rows, int64_t n, int64_t dim, float* kt);
  // Scores of n_q queries (q + u * dim) against a transposed key tile:
  // out[u * out_stride + j] = (sum over d in order of q_u[d] * kt[d][j]) *
  // scale, for j < kKeyTile. The _f16 variant is for fp16 operands (an f16
  // cache, the query rounded to f16): every product is then exact, so a
  // fused multiply-add rounds as multiply-then-add and SIMD may use FMA.
  void (*score_tile)(const float* kt, const float* q, int64_t n_q, int64_t dim, float scale,
                     float* out, int64_t out_stride);
  void (*score_tile_f16)(const float* kt, const float* q, int64_t n_q, int64_t dim, float scale,
                         float* out, int64_t out_stride);
  // Up to kMaxValueUnits query heads of one KV head, each over its own
  // positions: out_u[i] = sum over p in [begin[u], end[u]), in order, of
  // a_u[p] * v_p[i] (multiply, then add, from 0; 0 when the range is
  // empty), i < n, where v_p is rows' position p; no other position's row is
  // read. The f16 variant needs fp16 probabilities (so FMA is exact). SIMD
  // levels need n a multiple of 8.
  void (*weighted_range_f32)(const float* const* a, const int64_t* begin, const int64_t* end,
                             int n_units, const HeadRows& rows, float* const* out, int64_t n);
  void (*weighted_range_f16)(const float* const* a, const int64_t* begin, const int64_t* end,
                             int n_units, const HeadRows& rows, float* const* out, int64_t n);
  // weighted_range with every begin 0 and end n_pos.
  void (*weighted_f32)(const float* const* a, const int64_t* n_pos, int n_units,
                       const HeadRows& rows, float* const* out, int64_t n);
  void (*weighted_f16)(const float* const* a, const int64_t* n_pos, int n_units,
                       const HeadRows& rows, float* const* out, int64_t n);
  // Scores to probabilities in place, as ggml's soft_max (n > 0): the
  // row's scores s[0..n) fill 8-lane groups from lane `lead` (0..7, the
  // row's first position mod 8) of the first; max = the greatest score, then
  // the sink if it is greater (ggml's MAX(max, sink)); e_i = exp_approx(s_i
  // - max); each group summed in float as ((e0 + e4) + (e2 + e6)) + ((e1 +
  // e5) + (e3 + e7)), lanes outside the row 0, the group sums added in
  // double in order, then expf(sink - max) in double; s_i = e_i * float(1 /
  // sum), rounded to f16 when round_to_f16 (the probabilities an f16 mat-mul
  // would see). sink may be null (none). The lanes before `lead` are what
  // llama.cpp's -inf mask gives the positions before a window: e = 0.
  void (*softmax_window)(float* s, int64_t n, int64_t lead, const float* sink, bool round_to_f16);
  // softmax_window with lead 0 and no sink.
  void (*softmax)(float* s, int64_t n, bool round_to_f16);
};

namespace {

// Position p's row of one head: element type Element (float or uint16_t).
template <typename Element>
const Element* head_row(const HeadRows& rows, int64_t p) {
  return reinterpret_cast<const Element*>(
      rows.base + static_cast<size_t>(rows.cells[p]) * rows.row_bytes + rows.offset);
}

// The SIMD levels' weighted_range: the positions are cut at every head's
// begin and end; between two cuts the heads whose range covers the piece
// run their chains together (span(units, a, out, p0, p1, zero)), each
// chain continuing from its output (or starting from 0 at its begin), so
// each head's chain is its scalar order whatever the other heads cover.
// (These helpers are in an anonymous namespace: every SIMD object has its
// own copy, no weak symbol.)
template <class Span>
void weighted_by_cuts(const float* const* a, const int64_t* begin, const int64_t* end, int n_units,
                      float* const* out, int64_t n, Span span) {
  // Sorted without repeats, by insertion (no std::sort instance in a SIMD
  // object).
  int64_t cuts[2 * kMaxValueUnits];
  int n_cuts = 0;
  auto add_cut = [&](int64_t p) {
    int at = n_cuts;
    while (at > 0 && cuts[at - 1] > p) --at;
    if (at > 0 && cuts[at - 1] == p) return;
    for (int i = n_cuts; i > at; --i) cuts[i] = cuts[i - 1];
    cuts[at] = p;
    ++n_cuts;
  };
  auto zero_out = [n](float* o) {
    for (int64_t i = 0; i < n; ++i) o[i] = 0.0f;
  };
  for (int u = 0; u < n_units; ++u) {
    if (begin[u] >= end[u]) {
      zero_out(out[u]);
      continue;
    }
    add_cut(begin[u]);
    add_cut(end[u]);
  }
  for (int k = 0; k + 1 < n_cuts; ++k) {
    const int64_t p0 = cuts[k], p1 = cuts[k + 1];
    const float* sa[kMaxValueUnits];
    float* so[kMaxValueUnits];
    int units = 0;
    bool all_begin = true;  // every chain starts at p0: no output to load
    for (int u = 0; u < n_units; ++u) {
      if (begin[u] > p0 || end[u] < p1) continue;
      sa[units] = a[u];
      so[units++] = out[u];
      all_begin = all_begin && begin[u] == p0;
    }
    if (units == 0) continue;
    if (!all_begin) {
      for (int u = 0; u < n_units; ++u) {
        if (begin[u] == p0 && end[u] >= p1) zero_out(out[u]);
      }
    }
    span(units, sa, so, p0, p1, all_begin);
  }
}

}  // namespace

// The loops for this machine's SIMD level.
const AttentionLoops& attention_loops();
// The loops of one level (scalar, avx2 or avx512; the CPU must have it).
const AttentionLoops& attention_loops_of(SimdLevel level);

namespace scalar {
extern const AttentionLoops kAttentionLoops;
}
namespace avx2 {
extern const AttentionLoops kAttentionLoops;
}
namespace avx512 {
// Score tiles and value sums only: attention_loops_of(avx512) adds the
// AVX2 key transposes and softmax.
extern const AttentionLoops kAttentionLoops;
}  // namespace avx512

}  // namespace cortiq::kernels
