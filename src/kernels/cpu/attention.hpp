// Causal multi-head attention of query rows over the cached keys and values
// of their sequence, with grouped KV heads (GQA: query head h reads KV head
// h / (n_head / n_head_kv)).
//
// The result of a row depends only on its query and the cache rows it reads,
// never on which other rows are computed with it (batch invariance): rows
// computed together share the loads and conversions of the cache rows, not
// arithmetic. Numerics as the peer's non-flash path: scores = (q . k) *
// scale, softmax with exp_approx and the sum in double (ggml's AVX2
// soft_max), out = sum_p prob_p * v_p in position order; with an f16 cache
// the query and the probabilities are rounded to f16 first, as ggml's f16
// mat-mul does, so every product is exact.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace cortiq::kernels {

// Cached rows of one layer: row `cells[p]` holds the keys (or values) of
// position p, n_head_kv * head_dim elements of f32 or f16, row_bytes apart.
struct KvRowsView {
  const std::byte* base = nullptr;
  size_t row_bytes = 0;
  bool f16 = false;
  std::span<const int32_t> cells;  // cell of each position, 0..n_kv-1
};

struct AttentionShape {
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t head_dim_k = 0;
  int64_t head_dim_v = 0;
  float scale = 1.0f;  // usually 1/sqrt(head_dim_k)
};

// Floats of scratch attention_rows needs for n_rows rows attending to at
// most max_kv positions.
size_t attention_scratch_floats(const AttentionShape& shape, int64_t n_rows, int64_t max_kv);

// Rows of one sequence: row r (query q[r * n_head * head_dim_k ...]) attends
// to positions [0, n_kv[r]) (n_kv[r] <= cells.size()) and writes
// out[r * n_head * head_dim_v ...]. scratch holds attention_scratch_floats.
// Only the query heads of KV heads [kv_begin, kv_end) are computed (the
// others' outputs are left alone), so threads can share one row's heads.
void attention_rows(std::span<const float> q, std::span<const int64_t> n_kv, const KvRowsView& keys,
                    const KvRowsView& values, const AttentionShape& shape, std::span<float> out,
                    std::span<float> scratch, int64_t kv_begin, int64_t kv_end);

// One row, every head: attention_rows of {q} with {n_kv}.
void attention_row(std::span<const float> q, const KvRowsView& keys, const KvRowsView& values,
                   int64_t n_kv, const AttentionShape& shape, std::span<float> out,
                   std::span<float> scratch);

}  // namespace cortiq::kernels
