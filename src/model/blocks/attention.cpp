#include "model/attention_block.hpp"

#include <algorithm>
#include <array>

#include "base/thread_pool.hpp"
#include "kernels/cpu/activations.hpp"
#include "kernels/cpu/attention.hpp"
#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/norm.hpp"
#include "model/weights.hpp"
#include "runtime/kv_cache.hpp"

namespace cortiq {

AttentionWeights AttentionWeights::bind(const WeightBinder& b, const ModelHParams& hp,
                                        int64_t layer) {
  const auto name = [&](std::string_view what) { return WeightBinder::layer_name(layer, what); };
  AttentionWeights w;
  w.norm = b.vector(name("attn_norm.weight"), hp.n_embd);
  w.wq = b.matrix(name("attn_q.weight"), hp.n_embd, hp.q_width());
  w.wk = b.matrix(name("attn_k.weight"), hp.n_embd, hp.k_width());
  w.wv = b.matrix(name("attn_v.weight"), hp.n_embd, hp.v_width());
  w.wo = b.matrix(name("attn_output.weight"), hp.n_head * hp.head_dim_v, hp.n_embd);
  w.bq = b.optional_vector(name("attn_q.bias"), hp.q_width());
  w.bk = b.optional_vector(name("attn_k.bias"), hp.k_width());
  w.bv = b.optional_vector(name("attn_v.bias"), hp.v_width());
  w.bo = b.optional_vector(name("attn_output.bias"), hp.n_embd);
  w.q_norm = b.optional_vector(name("attn_q_norm.weight"), hp.head_dim_k);
  w.k_norm = b.optional_vector(name("attn_k_norm.weight"), hp.head_dim_k);
  return w;
}

namespace {

// Projects the normed rows to queries, keys and values, with biases, head
// norms and RoPE applied.
void project_qkv(const AttentionWeights& w, const ModelHParams& hp, const AttentionPass& pass,
                 ForwardContext& ctx, std::span<const float> normed, std::span<float> q,
                 std::span<float> k, std::span<float> v) {
  auto& buf = ctx.buffers;
  const auto n = static_cast<int64_t>(pass.rows.size());
  const auto rows = pass.rows.size();
  const kernels::MatmulOutput qkv[] = {
      {&w.wq, q, hp.q_width()}, {&w.wk, k, hp.k_width()}, {&w.wv, v, hp.v_width()}};
  kernels::matmul_shared_input(qkv, normed, n, ctx.pool, buf.matmul);
  kernels::add_bias_rows(q, w.bq);
  kernels::add_bias_rows(k, w.bk);
  kernels::add_bias_rows(v, w.bv);
  const auto qw = static_cast<size_t>(hp.q_width());
  const auto kw = static_cast<size_t>(hp.k_width());
  const auto rope_dims = static_cast<size_t>(pass.rope.n_dims);
  for (size_t r = 0; r < rows; ++r) {
    auto q_row = q.subspan(r * qw, qw);
    auto k_row = k.subspan(r * kw, kw);
    // Per-head RMS norms (qwen3's q_norm / k_norm), in place.
    const auto head_dim = static_cast<size_t>(hp.head_dim_k);
    if (!w.q_norm.empty()) kernels::rms_norm_rows(q_row, w.q_norm, hp.rms_eps, q_row, head_dim);
    if (!w.k_norm.empty()) kernels::rms_norm_rows(k_row, w.k_norm, hp.rms_eps, k_row, head_dim);
    const auto cache = pass.rope_cache.subspan(r * rope_dims, rope_dims);
    kernels::rope_apply(q_row, hp.n_head, hp.head_dim_k, pass.rope, cache);
    kernels::rope_apply(k_row, hp.n_head_kv, hp.head_dim_k, pass.rope, cache);
  }
}

// Query rows computed together by attention_rows: consecutive rows of one
// sequence share its cache rows' loads.
constexpr int64_t kAttentionRowTile = 16;

// Causal attention of every row over positions [0, pos] of its sequence.
// Rows are cut into tiles (consecutive rows of one sequence, at most
// kAttentionRowTile), and the work units are (tile, KV head) pairs: unit i
// goes to thread i % n_threads. Later rows attend to more positions, so
// interleaving keeps the threads even; splitting by KV head keeps both
// cores busy at decode, where there is a single row.
void attend(const ModelHParams& hp, int64_t layer, const AttentionPass& pass, const KvCache& cache,
            ForwardContext& ctx, std::span<const float> q, std::span<float> out) {
  auto& buf = ctx.buffers;
  const int n_threads = ctx.pool.size();
  const kernels::AttentionShape shape{hp.n_head, hp.n_head_kv, hp.head_dim_k, hp.head_dim_v,
                                      hp.kq_scale()};
  int64_t max_kv = 0;
  for (const auto& row : pass.rows) max_kv = std::max<int64_t>(max_kv, row.pos + 1);
  if (buf.scores.size() < static_cast<size_t>(n_threads)) buf.scores.resize(n_threads);
  for (auto& s : buf.scores) {
    ForwardBuffers::take(s, kernels::attention_scratch_floats(shape, kAttentionRowTile, max_kv));
  }
  const auto qw = static_cast<size_t>(hp.q_width());
  const auto ow = static_cast<size_t>(hp.n_head * hp.head_dim_v);
  const size_t n = pass.rows.size();
  const auto n_kv_heads = static_cast<size_t>(hp.n_head_kv);
  ctx.pool.run([&](int thread, int threads) {
    auto& scratch = buf.scores[static_cast<size_t>(thread)];
    std::array<int64_t, kAttentionRowTile> n_kv;
    size_t unit = 0;
    for (size_t begin = 0; begin < n;) {
      size_t end = begin + 1;
      while (end < n && end - begin < kAttentionRowTile &&
             pass.rows[end].seq == pass.rows[begin].seq) {
        ++end;
      }
      for (size_t r = begin; r < end; ++r) n_kv[r - begin] = pass.rows[r].pos + 1;
      const int32_t seq = pass.rows[begin].seq;
      for (size_t kh = 0; kh < n_kv_heads; ++kh, ++unit) {
        if (unit % static_cast<size_t>(threads) != static_cast<size_t>(thread)) continue;
        kernels::attention_rows(q.subspan(begin * qw, (end - begin) * qw),
                                std::span(n_kv).first(end - begin), cache.keys(layer, seq),
                                cache.values(layer, seq), shape,
                                out.subspan(begin * ow, (end - begin) * ow), scratch,
                                static_cast<int64_t>(kh), static_cast<int64_t>(kh) + 1);
      }
      begin = end;
    }
  });
}

}  // namespace

void attention_block(const AttentionWeights& w, const ModelHParams& hp, int64_t layer,
                     const AttentionPass& pass, KvCache& cache, ForwardContext& ctx,
                     std::span<float> residual) {
  auto& buf = ctx.buffers;
  const auto rows = pass.rows.size();
  const auto n_embd = static_cast<size_t>(hp.n_embd);
  auto normed = ForwardBuffers::take(buf.normed, rows * n_embd);
  auto q = ForwardBuffers::take(buf.q, rows * static_cast<size_t>(hp.q_width()));
  auto k = ForwardBuffers::take(buf.k, rows * static_cast<size_t>(hp.k_width()));
  auto v = ForwardBuffers::take(buf.v, rows * static_cast<size_t>(hp.v_width()));
  auto attn =
      ForwardBuffers::take(buf.attn_out, rows * static_cast<size_t>(hp.n_head * hp.head_dim_v));
  auto proj = ForwardBuffers::take(buf.proj, rows * n_embd);

  kernels::rms_norm_rows(residual.first(rows * n_embd), w.norm, hp.rms_eps, normed, n_embd);
  project_qkv(w, hp, pass, ctx, normed, q, k, v);
  const auto kw = static_cast<size_t>(hp.k_width());
  const auto vw = static_cast<size_t>(hp.v_width());
  for (size_t r = 0; r < rows; ++r) {
    cache.store_k(layer, pass.cells[r], k.subspan(r * kw, kw));
    cache.store_v(layer, pass.cells[r], v.subspan(r * vw, vw));
  }
  attend(hp, layer, pass, cache, ctx, q, attn);
  kernels::matmul(w.wo, attn, static_cast<int64_t>(rows), proj, hp.n_embd, ctx.pool, buf.matmul);
  kernels::add_bias_rows(proj, w.bo);
  kernels::add_inplace(residual.first(rows * n_embd), proj);
}

}  // namespace cortiq
