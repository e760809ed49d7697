#include "model/blocks/latent_attention.hpp"

#include <algorithm>

#include "kernels/cpu/activations.hpp"
#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/norm.hpp"
#include "kernels/cpu/rope.hpp"
#include "model/tensor_table.hpp"
#include "runtime/kv_cache.hpp"

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
                     int64_t n, ForwardContext& ctx, std::span<const float> in,
                     std::span<float> q) {
  auto& buf = ctx.buffers;
  const auto rows = static_cast<size_t>(n);
  const auto x = in.first(rows * static_cast<size_t>(hp.n_embd));
  if (hp.q_lora_rank == 0) {
    ctx.backend.matmul(w.wq, x, n, q, q_width);
    return;
  }
  const auto q_rank = static_cast<size_t>(hp.q_lora_rank);
  auto q_a = ForwardBuffers::take(buf.latent_a, rows * q_rank);
  ctx.backend.matmul(w.wq_a, x, n, q_a, hp.q_lora_rank);
  ctx.backend.rms_norm_rows(q_a, w.q_a_norm, hp.rms_eps, q_a, q_rank);
  ctx.backend.matmul(w.wq_b, q_a, n, q, q_width);
}

// One matrix per head: out[r][h][0, n_out) = w[h] · in[r][h][0, width),
// where a row of `in` holds n_head parts of in_step floats and a row of
// `out` n_head parts of out_step. A single row runs every head in one
// dispatch; more rows run a head at a time over its gathered inputs.
void per_head_matmul(std::span<const kernels::WeightView> w, size_t rows, size_t width,
                     size_t in_step, std::span<const float> in, size_t out_step,
                     std::span<float> out, ForwardContext& ctx) {
  auto& buf = ctx.buffers;
  const size_t n_head = w.size();
  if (rows == 1) {
    auto& products = buf.moe_products;
    auto& inputs = buf.moe_inputs;
    products.clear();
    inputs.clear();
    for (size_t h = 0; h < n_head; ++h) {
      const int64_t n_out = w[h].n_rows;
      products.push_back({&w[h], out.subspan(h * out_step, static_cast<size_t>(n_out)), n_out});
      inputs.push_back(in.subspan(h * in_step, width));
    }
    ctx.backend.matmul_each_input(products, inputs);
    return;
  }
  const auto x = ForwardBuffers::take(buf.latent_b, rows * width);
  for (size_t h = 0; h < n_head; ++h) {
    for (size_t r = 0; r < rows; ++r) {
      std::copy_n(in.begin() + static_cast<std::ptrdiff_t>(r * n_head * in_step + h * in_step),
                  width, x.begin() + static_cast<std::ptrdiff_t>(r * width));
    }
    ctx.backend.matmul(w[h], x, static_cast<int64_t>(rows), out.subspan(h * out_step),
                       static_cast<int64_t>(n_head * out_step));
  }
}

// The expanded form: every head's key and value built from the latent and
// cached.
void expanded_keys_values(const LatentAttentionWeights& w, const ModelHParams& hp, int64_t layer,
                          const AttentionPass& pass, KvCache& cache, ForwardContext& ctx,
                          std::span<float> q, std::span<float> kv_a,
                          std::span<const float> latent) {
  auto& buf = ctx.buffers;
  const LayerSpec& l = hp.layer(layer);
  const auto rows = pass.rows.size();
  const auto n_head = static_cast<size_t>(l.n_head);
  const auto dk = static_cast<size_t>(l.head_dim_k), dv = static_cast<size_t>(l.head_dim_v);
  const auto rope = static_cast<size_t>(hp.rope.n_dims), nope = dk - rope;
  const auto kv_rank = static_cast<size_t>(hp.kv_lora_rank);
  const size_t kv_a_width = kv_rank + rope;
  const size_t kv_b_width = n_head * (nope + dv);
  auto kv = ForwardBuffers::take(buf.latent_b, rows * kv_b_width);
  ctx.backend.matmul(w.wkv_b, latent, static_cast<int64_t>(rows), kv,
                     static_cast<int64_t>(kv_b_width));

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
}

// The absorbed form: the cached row is the latent and the rotated shared
// key; the queries come in latent space, qa [rows][n_head][kv_rank + rope].
void absorbed_queries_and_cache(const LatentAttentionWeights& w, const ModelHParams& hp,
                                int64_t layer, const AttentionPass& pass, KvCache& cache,
                                ForwardContext& ctx, std::span<float> q, std::span<float> kv_a,
                                std::span<const float> latent, std::span<float> qa) {
  const LayerSpec& l = hp.layer(layer);
  const auto rows = pass.rows.size();
  const auto n_head = static_cast<size_t>(l.n_head);
  const auto qk = static_cast<size_t>(hp.mla_head_dim_k);
  const auto rope = static_cast<size_t>(hp.rope.n_dims), nope = qk - rope;
  const auto kv_rank = static_cast<size_t>(hp.kv_lora_rank);
  const size_t row = kv_rank + rope;  // a cached row, a latent query head
  per_head_matmul(w.wk_b, rows, nope, qk, q, row, qa, ctx);
  // Kimi Linear's layers leave the "rope" part unrotated (LayerSpec::rope none).
  const bool rotated = l.rope != RopeSlot::none;
  const RopeTable& table = pass.rope[static_cast<size_t>(RopeSlot::global)];
  for (size_t r = 0; r < rows; ++r) {
    const auto cos_sin = rotated ? table.cache.subspan(r * rope, rope) : std::span<const float>{};
    auto k_row = kv_a.subspan(r * row, row);
    if (rotated) {
      kernels::rope_apply(k_row.subspan(kv_rank, rope), 1, static_cast<int64_t>(rope),
                          *table.params, cos_sin);
    }
    std::ranges::copy(latent.subspan(r * kv_rank, kv_rank), k_row.begin());
    cache.store_k(layer, pass.cells[r], k_row);
    for (size_t h = 0; h < n_head; ++h) {
      auto q_rope = q.subspan((r * n_head + h) * qk + nope, rope);
      if (rotated) {
        kernels::rope_apply(q_rope, 1, static_cast<int64_t>(rope), *table.params, cos_sin);
      }
      std::ranges::copy(q_rope,
                        qa.begin() + static_cast<std::ptrdiff_t>((r * n_head + h) * row + kv_rank));
    }
  }
}

// Mistral Large 3: each row's queries (q [rows][width]) times its
// position's attention temperature, after RoPE (and, absorbed, in latent
// space), as llama.cpp multiplies its Qcur.
void apply_temperature(const ModelHParams& hp, const AttentionPass& pass, std::span<float> q,
                       size_t width) {
  if (hp.attn_temperature.scale == 0.0f) return;
  for (size_t r = 0; r < pass.rows.size(); ++r) {
    kernels::scale_inplace(q.subspan(r * width, width),
                           attention_temperature(hp, pass.rows[r].pos));
  }
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
                      ConstTensor in_tensor, Tensor out_tensor) {
  ctx.host_only("latent attention");
  const std::span<const float> in = in_tensor;
  const std::span<float> out = out_tensor;
  auto& buf = ctx.buffers;
  const LayerSpec& l = hp.layer(layer);
  const auto rows = pass.rows.size();
  const auto n = static_cast<int64_t>(rows);
  const auto n_head = static_cast<size_t>(l.n_head);
  const auto qk = static_cast<size_t>(head_qk(hp, l)), dv = static_cast<size_t>(head_v(hp, l));
  const auto rope = static_cast<size_t>(hp.rope.n_dims);
  const auto kv_rank = static_cast<size_t>(hp.kv_lora_rank);

  auto q = ForwardBuffers::take(buf.q, rows * n_head * qk);
  project_queries(w, hp, l.n_head * static_cast<int64_t>(qk), n, ctx, in, q);

  // The compressed latent and the shared rope key; the latent normed.
  const size_t kv_a_width = kv_rank + rope;
  auto kv_a = ForwardBuffers::take(buf.qkv, rows * kv_a_width);
  ctx.backend.matmul(w.wkv_a, in.first(rows * static_cast<size_t>(hp.n_embd)), n, kv_a,
                     static_cast<int64_t>(kv_a_width));
  auto latent = ForwardBuffers::take(buf.latent_a, rows * kv_rank);
  for (size_t r = 0; r < rows; ++r) {
    kernels::rms_norm(kv_a.subspan(r * kv_a_width, kv_rank), w.kv_a_norm, hp.rms_eps,
                      latent.subspan(r * kv_rank, kv_rank));
  }

  auto attn = ForwardBuffers::take(buf.attn_out, rows * n_head * dv);
  if (absorbed(hp)) {
    auto qa = ForwardBuffers::take(buf.k, rows * n_head * kv_a_width);
    absorbed_queries_and_cache(w, hp, layer, pass, cache, ctx, q, kv_a, latent, qa);
    apply_temperature(hp, pass, qa, n_head * kv_a_width);
    auto attn_latent = ForwardBuffers::take(buf.v, rows * n_head * kv_rank);
    attend_over_cache(hp, layer, pass, cache, ctx, qa, attn_latent);
    per_head_matmul(w.wv_b, rows, kv_rank, kv_rank, attn_latent, dv, attn, ctx);
  } else {
    expanded_keys_values(w, hp, layer, pass, cache, ctx, q, kv_a, latent);
    apply_temperature(hp, pass, q, n_head * qk);
    attend_over_cache(hp, layer, pass, cache, ctx, q, attn);
  }
  const auto out_rows = out.first(rows * static_cast<size_t>(hp.n_embd));
  ctx.backend.matmul(w.wo, attn, n, out_rows, hp.n_embd);
  if (w.o_scale != 1.0f) ctx.backend.scale(out_rows, w.o_scale);
}

}  // namespace cortiq
