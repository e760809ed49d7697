// Causal multi-head attention of query rows over the cached keys and values
// of their sequence, with grouped KV heads (GQA: query head h reads KV head
// h / (n_head / n_head_kv)), and the variants of the model families:
// a first position per row (sliding windows: Gemma 2/3, Cohere2, Phi-3,
// Mistral), a logit softcap (Gemma 2), learned sinks (GPT-OSS) and ALiBi
// (BLOOM, MPT).
//
// The result of a row depends only on its query and the cache rows it reads,
// never on which other rows are computed with it (batch invariance): rows
// computed together share the loads and conversions of the cache rows, not
// arithmetic. Numerics as llama.cpp's non-flash path (build_attn_mha in
// llama-graph.cpp): kq = q . k; with a softcap kq = tanhf(kq * (1/softcap))
// * softcap; then soft_max_ext: s = kq * scale (+ slope_h * -(query_pos -
// key_pos) with ALiBi), softmax with exp_approx and the sum in double (ggml's
// AVX2 soft_max; a sink takes part in the max and adds expf(sink - max) to
// the sum); out = sum_p prob_p * v_p in position order. With an f16 cache
// the query and the probabilities are rounded to f16 first, as ggml's f16
// mat-mul does, so every product is exact. A row's positions below its first
// position give exactly what llama.cpp's -inf mask gives there (probability
// 0, nothing added), but are never summed; the cache cells below the first
// position of every row of a call are never read (the cache may release
// them), so a window costs O(window), not O(position).
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

// The defaults of the last three fields leave plain attention, bit for bit.
struct AttentionShape {
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t head_dim_k = 0;
  int64_t head_dim_v = 0;
  float scale = 1.0f;  // soft_max_ext's scale, usually 1/sqrt(head_dim_k)
  // Logit softcap (attn_logit_softcapping), 0 = off: kq = tanhf(kq *
  // softcap_scale) * softcap before the scale.
  float softcap = 0.0f;
  // The dot's multiplier inside the softcap's tanh; 0 = 1/softcap (Gemma
  // 2). Grok's: attention.output_scale / softcap, its scale then 1.
  float softcap_scale = 0.0f;
  // ALiBi's max_bias, 0 = off: soft_max_ext adds slope_h * -(query_pos -
  // key_pos), the query at position n_kv - 1.
  float alibi_max_bias = 0.0f;
  // One learned logit per query head (n_head values), empty = none: it
  // takes probability mass in the head's softmax but has no value row.
  std::span<const float> sinks = {};
};

// Floats of scratch attention_rows needs for n_rows rows whose positions
// together span at most max_positions: max n_kv - min kv_start over the
// rows (max n_kv when they all start at 0).
size_t attention_scratch_floats(const AttentionShape& shape, int64_t n_rows, int64_t max_positions);

// ALiBi's slope for query head h of n_head (AttentionShape::alibi_max_bias),
// as ggml's soft_max_ext computes it, types included.
float alibi_slope(float max_bias, int64_t n_head, int64_t h);

// Rows of one sequence: row r (query q[r * n_head * head_dim_k ...]) attends
// to positions [kv_start[r], n_kv[r]) (0 <= kv_start[r] <= n_kv[r] <=
// cells.size(); an empty kv_start means all 0) and writes out[r * n_head *
// head_dim_v ...] (zeros for a row without positions). scratch holds
// attention_scratch_floats. Only the query heads of KV heads [kv_begin,
// kv_end) are computed (the others' outputs are left alone), so threads can
// share one row's heads.
void attention_rows(std::span<const float> q, std::span<const int64_t> kv_start,
                    std::span<const int64_t> n_kv, const KvRowsView& keys, const KvRowsView& values,
                    const AttentionShape& shape, std::span<float> out, std::span<float> scratch,
                    int64_t kv_begin, int64_t kv_end);

// Rows that all start at position 0.
void attention_rows(std::span<const float> q, std::span<const int64_t> n_kv, const KvRowsView& keys,
                    const KvRowsView& values, const AttentionShape& shape, std::span<float> out,
                    std::span<float> scratch, int64_t kv_begin, int64_t kv_end);

// One row, every head: attention_rows of {q} over positions [kv_start,
// n_kv).
void attention_row(std::span<const float> q, const KvRowsView& keys, const KvRowsView& values,
                   int64_t kv_start, int64_t n_kv, const AttentionShape& shape,
                   std::span<float> out, std::span<float> scratch);

// One row, every head, over positions [0, n_kv).
void attention_row(std::span<const float> q, const KvRowsView& keys, const KvRowsView& values,
                   int64_t n_kv, const AttentionShape& shape, std::span<float> out,
                   std::span<float> scratch);

}  // namespace cortiq::kernels
