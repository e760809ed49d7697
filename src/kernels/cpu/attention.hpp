// Causal multi-head attention of one query row over the cached keys and
// values of its sequence, with grouped KV heads (GQA: query head h reads KV
// head h / (n_head / n_head_kv)).
//
// The result of a row depends only on its query and the cache rows it reads,
// never on which other rows are in the batch (batch invariance). Numerics as
// the peer's non-flash path: scores = (q . k) * scale, softmax with the sum
// in double, out = sum_p prob_p * v_p; with an f16 cache the query and the
// probabilities are rounded to f16 first, as ggml's f16 mat-mul does.
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

// q: n_head * head_dim_k floats; out: n_head * head_dim_v floats; attends to
// positions [0, n_kv) of keys/values (n_kv <= cells.size()). scratch must
// hold at least n_kv + head_dim_k floats.
void attention_row(std::span<const float> q, const KvRowsView& keys, const KvRowsView& values,
                   int64_t n_kv, const AttentionShape& shape, std::span<float> out,
                   std::span<float> scratch);

}  // namespace cortiq::kernels
