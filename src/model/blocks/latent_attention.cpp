#include "model/blocks/latent_attention.hpp"

#include <algorithm>

#include "kernels/cpu/activations.hpp"
#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/norm.hpp"
#include "kernels/cpu/rope.hpp"
#include "model/tensor_table.hpp"
#include "runtime/kv_cache.hpp"

namespace cortiq {

void LatentAttentionWeights::visit(TensorVisitor& v, const ModelHParams& hp, int64_t layer) {
  const LayerSpec& l = hp.layer(layer);
  const auto name = [&](std::string_view what) { return layer_tensor_name(layer, what); };
  const int64_t rope = hp.rope.n_dims, nope = l.head_dim_k - rope;
  v.vector(q_a_norm, name("attn_q_a_norm.weight"), hp.q_lora_rank, TensorKind::norm);
  v.vector(kv_a_norm, name("attn_kv_a_norm.weight"), hp.kv_lora_rank, TensorKind::norm);
  v.matrix(wq_a, name("attn_q_a.weight"), hp.n_embd, hp.q_lora_rank);
  v.matrix(wq_b, name("attn_q_b.weight"), hp.q_lora_rank, l.n_head * l.head_dim_k);
  v.matrix(wkv_a, name("attn_kv_a_mqa.weight"), hp.n_embd, hp.kv_lora_rank + rope);
  v.matrix(wkv_b, name("attn_kv_b.weight"), hp.kv_lora_rank, l.n_head * (nope + l.head_dim_v));
  v.matrix(wo, name("attn_output.weight"), l.n_head * l.head_dim_v, hp.n_embd);
  v.scale(o_scale, name("attn_output.scale"));
  v.scale_without_effect(name("attn_output.input_scale"));
}

void latent_attention(const LatentAttentionWeights& w, const ModelHParams& hp, int64_t layer,
                      const AttentionPass& pass, KvCache& cache, ForwardContext& ctx,
                      std::span<const float> in, std::span<float> out) {
  auto& buf = ctx.buffers;
  const LayerSpec& l = hp.layer(layer);
  const auto rows = pass.rows.size();
  const auto n = static_cast<int64_t>(rows);
  const auto n_head = static_cast<size_t>(l.n_head);
  const auto dk = static_cast<size_t>(l.head_dim_k), dv = static_cast<size_t>(l.head_dim_v);
  const auto rope = static_cast<size_t>(hp.rope.n_dims), nope = dk - rope;
  const auto q_rank = static_cast<size_t>(hp.q_lora_rank);
  const auto kv_rank = static_cast<size_t>(hp.kv_lora_rank);
  const size_t kv_b_width = n_head * (nope + dv);

  // Queries: q_a, its RMS norm, q_b.
  auto q_a = ForwardBuffers::take(buf.latent_a, rows * q_rank);
  kernels::matmul(w.wq_a, in.first(rows * static_cast<size_t>(hp.n_embd)), n, q_a, hp.q_lora_rank,
                  ctx.pool, buf.matmul);
  kernels::rms_norm_rows(q_a, w.q_a_norm, hp.rms_eps, q_a, q_rank);
  auto q = ForwardBuffers::take(buf.q, rows * n_head * dk);
  kernels::matmul(w.wq_b, q_a, n, q, l.n_head * l.head_dim_k, ctx.pool, buf.matmul);

  // The compressed latent and the shared rope key; the latent normed and
  // expanded to each head's nope key and value.
  const size_t kv_a_width = kv_rank + rope;
  auto kv_a = ForwardBuffers::take(buf.qkv, rows * kv_a_width);
  kernels::matmul(w.wkv_a, in.first(rows * static_cast<size_t>(hp.n_embd)), n, kv_a,
                  static_cast<int64_t>(kv_a_width), ctx.pool, buf.matmul);
  auto latent = ForwardBuffers::take(buf.latent_a, rows * kv_rank);
  for (size_t r = 0; r < rows; ++r) {
    kernels::rms_norm(kv_a.subspan(r * kv_a_width, kv_rank), w.kv_a_norm, hp.rms_eps,
                      latent.subspan(r * kv_rank, kv_rank));
  }
  auto kv = ForwardBuffers::take(buf.latent_b, rows * kv_b_width);
  kernels::matmul(w.wkv_b, latent, n, kv, static_cast<int64_t>(kv_b_width), ctx.pool, buf.matmul);

  // RoPE on each query head's trailing rope dims and on the shared key part;
  // each head's key is its nope part and that rotated part.
  auto k = ForwardBuffers::take(buf.k, rows * n_head * dk);
  auto v = ForwardBuffers::take(buf.v, rows * n_head * dv);
  const RopeTable& table = pass.rope[static_cast<size_t>(RopeSlot::global)];
  for (size_t r = 0; r < rows; ++r) {
    const auto cos_sin = table.cache.subspan(r * rope, rope);
    auto k_rope = kv_a.subspan(r * kv_a_width + kv_rank, rope);
    kernels::rope_apply(k_rope, 1, static_cast<int64_t>(rope), *table.params, cos_sin);
    for (size_t h = 0; h < n_head; ++h) {
      auto q_head = q.subspan((r * n_head + h) * dk, dk);
      kernels::rope_apply(q_head.subspan(nope, rope), 1, static_cast<int64_t>(rope), *table.params,
                          cos_sin);
      const auto kv_head = kv.subspan(r * kv_b_width + h * (nope + dv), nope + dv);
      auto k_head = k.subspan((r * n_head + h) * dk, dk);
      std::ranges::copy(kv_head.first(nope), k_head.begin());
      std::ranges::copy(k_rope, k_head.begin() + static_cast<std::ptrdiff_t>(nope));
      std::ranges::copy(kv_head.subspan(nope, dv), v.subspan((r * n_head + h) * dv, dv).begin());
    }
  }
  for (size_t r = 0; r < rows; ++r) {
    cache.store_k(layer, pass.cells[r], k.subspan(r * n_head * dk, n_head * dk));
    cache.store_v(layer, pass.cells[r], v.subspan(r * n_head * dv, n_head * dv));
  }
  auto attn = ForwardBuffers::take(buf.attn_out, rows * n_head * dv);
  attend_over_cache(hp, layer, pass, cache, ctx, q, attn);
  const auto out_rows = out.first(rows * static_cast<size_t>(hp.n_embd));
  kernels::matmul(w.wo, attn, n, out_rows, hp.n_embd, ctx.pool, buf.matmul);
  if (w.o_scale != 1.0f) kernels::scale_inplace(out_rows, w.o_scale);
}

}  // namespace cortiq
