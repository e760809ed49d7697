#include "model/blocks/latent_attention.hpp"

#include "kv/kv_cache.hpp"
#include "model/tensor_table.hpp"

namespace cortiq {

namespace {

bool absorbed(const ModelHParams& hp) {
  return hp.mla_head_dim_k > 0;
}

// A head's query/key width (nope + rope) and value width.
int64_t head_qk(const ModelHParams& hp, const LayerSpec& l) {
  return absorbed(hp) ? hp.mla_head_dim_k : l.head_dim_k;
}
int64_t head_v(const ModelHParams& hp, const LayerSpec& l) {
  return absorbed(hp) ? hp.mla_head_dim_v : l.head_dim_v;
}

// q [rows][n_head * qk]: through the query LoRA, or attn_q.
void project_queries(const LatentAttentionWeights& w, const ModelHParams& hp, int64_t q_width,
                     int64_t n, ForwardContext& ctx, ConstTensor in, Tensor q) {
  auto& backend = ctx.backend;
  const auto rows = static_cast<size_t>(n);
  const ConstTensor x = in.first(rows * static_cast<size_t>(hp.n_embd));
  if (hp.q_lora_rank == 0) {
    backend.matmul(w.wq, x, n, q, q_width);
    return;
  }
  const auto q_rank = static_cast<size_t>(hp.q_lora_rank);
  const Tensor q_a = backend.scratch(ctx.buffers.latent_a, rows * q_rank);
  backend.matmul(w.wq_a, x, n, q_a, hp.q_lora_rank);
  backend.rms_norm_rows(q_a, w.q_a_norm, hp.rms_eps, q_a, q_rank);
  backend.matmul(w.wq_b, q_a, n, q, q_width);
}

// RoPE of one part of each head: rows of n_parts parts `stride` apart,
// each rotating the `rope` values at `offset` into the part, with row r's
// position (table row r). The parts go through a contiguous copy
// (ForwardBuffers::rope_parts), since rope_rows rotates whole heads.
void rope_parts(ForwardContext& ctx, const RopeTable& table, Tensor x, size_t rows, size_t n_parts,
                size_t stride, size_t offset, size_t rope) {
  auto& backend = ctx.backend;
  const Tensor parts = backend.scratch(ctx.buffers.rope_parts, rows * n_parts * rope);
  backend.copy_rows(x.subspan(offset), stride, parts, rope, rope, rows * n_parts);
  backend.rope_rows(parts, rows, static_cast<int64_t>(n_parts), static_cast<int64_t>(rope),
                    *table.params, table.cache);
  backend.copy_rows(parts, rope, x.subspan(offset), stride, rope, rows * n_parts);
}

// One matrix per head: out[r][h][0, n_out) = w[h] · in[r][h][0, width),
// where a row of `in` holds n_head parts of in_step floats and a row of
// `out` n_head parts of out_step. A single row runs every head in one
// dispatch; more rows run a head at a time over its gathered inputs.
void per_head_matmul(std::span<const kernels::WeightView> w, size_t rows, size_t width,
                     size_t in_step, ConstTensor in, size_t out_step, Tensor out,
                     ForwardContext& ctx) {
  auto& buf = ctx.buffers;
  auto& backend = ctx.backend;
  const size_t n_head = w.size();
  if (rows == 1) {
    auto& products = buf.products;
    auto& inputs = buf.product_inputs;
    products.clear();
    inputs.clear();
    for (size_t h = 0; h < n_head; ++h) {
      const int64_t n_out = w[h].n_rows;
      products.push_back({&w[h], out.subspan(h * out_step, static_cast<size_t>(n_out)), n_out});
      inputs.push_back(in.subspan(h * in_step, width));
    }
    backend.matmul_each_input(products, inputs);
    return;
  }
  const Tensor x = backend.scratch(buf.latent_b, rows * width);
  for (size_t h = 0; h < n_head; ++h) {
    backend.copy_rows(in.subspan(h * in_step), n_head * in_step, x, width, width, rows);
    backend.matmul(w[h], x, static_cast<int64_t>(rows), out.subspan(h * out_step),
                   static_cast<int64_t>(n_head * out_step));
  }
}

// The expanded form: every head's key and value built from the latent and
// cached.
void expanded_keys_values(const LatentAttentionWeights& w, const ModelHParams& hp, int64_t layer,
                          const AttentionPass& pass, KvCache& cache, ForwardContext& ctx, Tensor q,
                          Tensor kv_a, ConstTensor latent) {
  auto& buf = ctx.buffers;
  auto& backend = ctx.backend;
  const LayerSpec& l = hp.layer(layer);
  const auto rows = pass.rows.size();
  const auto n_head = static_cast<size_t>(l.n_head);
  const auto dk = static_cast<size_t>(l.head_dim_k), dv = static_cast<size_t>(l.head_dim_v);
  const auto rope = static_cast<size_t>(hp.rope.n_dims), nope = dk - rope;
  const auto kv_rank = static_cast<size_t>(hp.kv_lora_rank);
  const size_t kv_a_width = kv_rank + rope;
  const size_t head_kv = nope + dv;  // a head's [key nope | value] in kv_b's product
  const Tensor kv = backend.scratch(buf.latent_b, rows * n_head * head_kv);
  backend.matmul(w.wkv_b, latent, static_cast<int64_t>(rows), kv,
                 static_cast<int64_t>(n_head * head_kv));

  // RoPE on each query head's trailing rope dims and on the shared key part;
  // each head's key is its nope part and that rotated part.
  const RopeTable& table = pass.rope[static_cast<size_t>(RopeSlot::global)];
  rope_parts(ctx, table, kv_a, rows, 1, kv_a_width, kv_rank, rope);
  rope_parts(ctx, table, q, rows, n_head, dk, nope, rope);
  const Tensor k = backend.scratch(buf.k, rows * n_head * dk);
  const Tensor v = backend.scratch(buf.v, rows * n_head * dv);
  backend.copy_rows(kv, head_kv, k, dk, nope, rows * n_head);
  backend.copy_rows(kv.subspan(nope), head_kv, v, dv, dv, rows * n_head);
  for (size_t h = 0; h < n_head; ++h) {
    backend.copy_rows(kv_a.subspan(kv_rank), kv_a_width, k.subspan(h * dk + nope), n_head * dk,
                      rope, rows);
  }
  backend.store_kv(cache, layer, pass.cells, k, v, n_head * dk, n_head * dv);
}

// The absorbed form: the cached row is the latent and the rotated shared
// key; the queries come in latent space, qa [rows][n_head][kv_rank + rope].
void absorbed_queries_and_cache(const LatentAttentionWeights& w, const ModelHParams& hp,
                                int64_t layer, const AttentionPass& pass, KvCache& cache,
                                ForwardContext& ctx, Tensor q, Tensor kv_a, ConstTensor latent,
                                Tensor qa) {
  auto& backend = ctx.backend;
  const LayerSpec& l = hp.layer(layer);
  const auto rows = pass.rows.size();
  const auto n_head = static_cast<size_t>(l.n_head);
  const auto qk = static_cast<size_t>(hp.mla_head_dim_k);
  const auto rope = static_cast<size_t>(hp.rope.n_dims), nope = qk - rope;
  const auto kv_rank = static_cast<size_t>(hp.kv_lora_rank);
  const size_t row = kv_rank + rope;  // a cached row, a latent query head
  per_head_matmul(w.wk_b, rows, nope, qk, q, row, qa, ctx);
  // Kimi Linear's layers leave the "rope" part unrotated (LayerSpec::rope none).
  if (l.rope != RopeSlot::none) {
    const RopeTable& table = pass.rope[static_cast<size_t>(RopeSlot::global)];
    rope_parts(ctx, table, kv_a, rows, 1, row, kv_rank, rope);
    rope_parts(ctx, table, q, rows, n_head, qk, nope, rope);
  }
  backend.copy_rows(latent, kv_rank, kv_a, row, kv_rank, rows);
  backend.store_kv(cache, layer, pass.cells, kv_a, {}, row, 0);
  backend.copy_rows(q.subspan(nope), qk, qa.subspan(kv_rank), row, rope, rows * n_head);
}

}  // namespace

void LatentAttentionWeights::visit(TensorVisitor& v, const ModelHParams& hp, int64_t layer) {
  const LayerSpec& l = hp.layer(layer);
  const auto name = [&](std::string_view what) { return layer_tensor_name(layer, what); };
  const int64_t rope = hp.rope.n_dims, qk = head_qk(hp, l), dv = head_v(hp, l), nope = qk - rope;
  if (hp.q_lora_rank > 0) {
    v.vector(q_a_norm, name("attn_q_a_norm.weight"), hp.q_lora_rank, TensorKind::norm);
  }
  v.vector(kv_a_norm, name("attn_kv_a_norm.weight"), hp.kv_lora_rank, TensorKind::norm);
  if (hp.q_lora_rank > 0) {
    v.matrix(wq_a, name("attn_q_a.weight"), hp.n_embd, hp.q_lora_rank);
    v.matrix(wq_b, name("attn_q_b.weight"), hp.q_lora_rank, l.n_head * qk);
  } else {
    v.matrix(wq, name("attn_q.weight"), hp.n_embd, l.n_head * qk);
    v.scale_without_effect(name("attn_q.scale"));
    v.scale_without_effect(name("attn_q.input_scale"));
  }
  v.matrix(wkv_a, name("attn_kv_a_mqa.weight"), hp.n_embd, hp.kv_lora_rank + rope);
  if (absorbed(hp)) {
    v.experts(wk_b, name("attn_k_b.weight"), nope, hp.kv_lora_rank, l.n_head);
    v.experts(wv_b, name("attn_v_b.weight"), hp.kv_lora_rank, dv, l.n_head);
  } else {
    v.matrix(wkv_b, name("attn_kv_b.weight"), hp.kv_lora_rank, l.n_head * (nope + dv));
  }
  v.matrix(wo, name("attn_output.weight"), l.n_head * dv, hp.n_embd);
  v.scale(o_scale, name("attn_output.scale"));
  v.scale_without_effect(name("attn_output.input_scale"));
}

void latent_attention(const LatentAttentionWeights& w, const ModelHParams& hp, int64_t layer,
                      const AttentionPass& pass, KvCache& cache, ForwardContext& ctx,
                      ConstTensor in, Tensor out) {
  auto& buf = ctx.buffers;
  auto& backend = ctx.backend;
  const LayerSpec& l = hp.layer(layer);
  const auto rows = pass.rows.size();
  const auto n = static_cast<int64_t>(rows);
  const auto n_head = static_cast<size_t>(l.n_head);
  const auto qk = static_cast<size_t>(head_qk(hp, l)), dv = static_cast<size_t>(head_v(hp, l));
  const auto rope = static_cast<size_t>(hp.rope.n_dims);
  const auto kv_rank = static_cast<size_t>(hp.kv_lora_rank);

  const Tensor q = backend.scratch(buf.q, rows * n_head * qk);
  project_queries(w, hp, l.n_head * static_cast<int64_t>(qk), n, ctx, in, q);

  // The compressed latent and the shared rope key; the latent normed.
  const size_t kv_a_width = kv_rank + rope;
  const Tensor kv_a = backend.scratch(buf.qkv, rows * kv_a_width);
  backend.matmul(w.wkv_a, in.first(rows * static_cast<size_t>(hp.n_embd)), n, kv_a,
                 static_cast<int64_t>(kv_a_width));
  const Tensor latent = backend.scratch(buf.latent_a, rows * kv_rank);
  backend.copy_rows(kv_a, kv_a_width, latent, kv_rank, kv_rank, rows);
  backend.rms_norm_rows(latent, w.kv_a_norm, hp.rms_eps, latent, kv_rank);

  const Tensor attn = backend.scratch(buf.attn_out, rows * n_head * dv);
  if (absorbed(hp)) {
    const Tensor qa = backend.scratch(buf.k, rows * n_head * kv_a_width);
    absorbed_queries_and_cache(w, hp, layer, pass, cache, ctx, q, kv_a, latent, qa);
    scale_by_temperature(hp, pass.rows, ctx, qa, n_head * kv_a_width);  // Mistral Large 3
    const Tensor attn_latent = backend.scratch(buf.v, rows * n_head * kv_rank);
    attend_over_cache(hp, layer, pass, cache, ctx, qa, attn_latent);
    per_head_matmul(w.wv_b, rows, kv_rank, kv_rank, attn_latent, dv, attn, ctx);
  } else {
    expanded_keys_values(w, hp, layer, pass, cache, ctx, q, kv_a, latent);
    scale_by_temperature(hp, pass.rows, ctx, q, n_head * qk);  // Mistral Large 3
    attend_over_cache(hp, layer, pass, cache, ctx, q, attn);
  }
  const Tensor out_rows = out.first(rows * static_cast<size_t>(hp.n_embd));
  backend.matmul(w.wo, attn, n, out_rows, hp.n_embd);
  if (w.o_scale != 1.0f) backend.scale(out_rows, w.o_scale);
}

}  // namespace cortiq
