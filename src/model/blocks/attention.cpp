#include "model/blocks/attention.hpp"

#include <algorithm>
#include <array>
#include <cmath>

#include "base/thread_pool.hpp"
#include "kernels/cpu/activations.hpp"
#include "kernels/cpu/attention.hpp"
#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/norm.hpp"
#include "kv/kv_cache.hpp"
#include "model/tensor_table.hpp"

namespace cortiq {

void AttentionWeights::visit(TensorVisitor& v, const ModelHParams& hp, int64_t layer,
                             AttentionTensors extra) {
  const LayerSpec& l = hp.layer(layer);
  const auto name = [&](std::string_view what) { return layer_tensor_name(layer, what); };
  // llama.cpp's create_tensor_qkv: attn_qkv.weight when the file has it
  // (with its optional bias; the generic pass reads its .scale and
  // .input_scale), else Q/K/V with theirs. Families whose graph projects
  // without build_qkv (OLMo2) never read the fused one.
  const bool applied = extra.qkv_effect == QkvEffect::applied;
  query_gate = extra.gate == OutputGate::sigmoid_query;
  const bool fused =
      !query_gate && (extra.qkv == QkvForm::fused ||
                      (extra.qkv == QkvForm::file_decides && extra.qkv_effect != QkvEffect::none &&
                       v.has(name("attn_qkv.weight"), extra.fused_qkv_written)));
  qk_norm_after_rope = extra.qk_norm_after_rope;
  qk_plain_norm_after_rope = extra.qk_plain_norm_after_rope;
  if (extra.sinks) v.vector(sinks, name("attn_sinks.weight"), l.n_head, TensorKind::bias);
  if (extra.gate == OutputGate::softplus) visit_softplus_gate(v, hp, layer, extra);
  if (extra.sub_norm) {
    v.vector(sub_norm, name("attn_sub_norm.weight"), l.attn_out_width(), TensorKind::norm);
  }
  if (fused) {
    const int64_t width = l.q_width() + l.k_width() + l.v_width();
    v.matrix(wqkv, name("attn_qkv.weight"), hp.n_embd, width);
    // OpenELM's graph projects with the bare matrix: no bias is read.
    if (applied && extra.fused_qkv_bias != FusedQkvBias::none) {
      v.vector(bqkv, name("attn_qkv.bias"), width, TensorKind::bias,
               extra.fused_qkv_bias == FusedQkvBias::required);
    } else if (extra.qkv_effect == QkvEffect::none_fused_readable) {
      v.without_effect(name("attn_qkv.bias"), width, TensorKind::bias);
    }
    v.matrix(wo, name("attn_output.weight"), l.attn_out_width(), hp.n_embd);
    visit_output_bias(v, hp, layer, extra);
    if (applied) {
      v.scale(qkv_scale, name("attn_qkv.scale"));
    } else {
      v.scale_without_effect(name("attn_qkv.scale"));
    }
    v.scale(o_scale, name("attn_output.scale"));
    for (const char* input : {"attn_qkv", "attn_output"}) {
      v.scale_without_effect(name(std::string(input) + ".input_scale"));
    }
  } else {
    visit_separate_qkv(v, hp, layer, extra);
  }
  if (extra.qk_norm != QkNorm::none) visit_qk_norms(v, hp, layer, extra);
}

void AttentionWeights::visit_output_bias(TensorVisitor& v, const ModelHParams& hp, int64_t layer,
                                         AttentionTensors extra) {
  if (extra.output_bias == AttnOutputBias::none) return;
  v.vector(bo, layer_tensor_name(layer, "attn_output.bias"), hp.n_embd, TensorKind::bias,
           extra.output_bias == AttnOutputBias::required);
}

void AttentionWeights::visit_qk_norms(TensorVisitor& v, const ModelHParams& hp, int64_t layer,
                                      AttentionTensors extra) {
  const LayerSpec& l = hp.layer(layer);
  const auto name = [&](std::string_view what) { return layer_tensor_name(layer, what); };
  const bool required = extra.qk_norm == QkNorm::required;
  switch (extra.qk_norm_shape) {
    case QkNormShape::layer_whole:
      // MPT's optional layer norms over the whole Q and K projections.
      qk_norm_kind = QkNormKind::layer_whole;
      v.vector(q_norm, name("attn_q_norm.weight"), l.q_width(), TensorKind::norm, false);
      v.vector(q_norm_b, name("attn_q_norm.bias"), l.q_width(), TensorKind::bias, false);
      v.vector(k_norm, name("attn_k_norm.weight"), l.k_width(), TensorKind::norm, false);
      v.vector(k_norm_b, name("attn_k_norm.bias"), l.k_width(), TensorKind::bias, false);
      return;
    case QkNormShape::layer_per_head:
    case QkNormShape::rms_per_head:
      qk_norm_kind = extra.qk_norm_shape == QkNormShape::rms_per_head ? QkNormKind::rms_per_head
                                                                      : QkNormKind::layer_per_head;
      v.table(q_norm, name("attn_q_norm.weight"), l.head_dim_k, l.n_head, TensorKind::norm,
              required);
      v.table(k_norm, name("attn_k_norm.weight"), l.head_dim_k, l.n_head_kv, TensorKind::norm,
              required);
      return;
    case QkNormShape::head:
    case QkNormShape::whole: {
      const bool whole = extra.qk_norm_shape == QkNormShape::whole;
      v.vector(q_norm, name("attn_q_norm.weight"), whole ? l.q_width() : l.head_dim_k,
               TensorKind::norm, required);
      v.vector(k_norm, name("attn_k_norm.weight"), whole ? l.k_width() : l.head_dim_k,
               TensorKind::norm, required);
      return;
    }
  }
}

void AttentionWeights::visit_softplus_gate(TensorVisitor& v, const ModelHParams& hp, int64_t layer,
                                           AttentionTensors extra) {
  const LayerSpec& l = hp.layer(layer);
  const std::string name = layer_tensor_name(layer, "attn_gate.weight");
  const int64_t written = extra.gate_written_per_element ? l.attn_out_width() : l.n_head;
  // Any other width is refused by matrix()'s shape check, naming the tensor.
  gate_per_head = v.rows_of(name, written) == l.n_head && l.n_head != l.attn_out_width();
  v.matrix(gate, name, hp.n_embd, gate_per_head ? l.n_head : l.attn_out_width());
}

void AttentionWeights::visit_separate_qkv(TensorVisitor& v, const ModelHParams& hp, int64_t layer,
                                          AttentionTensors extra) {
  const LayerSpec& l = hp.layer(layer);
  const auto name = [&](std::string_view what) { return layer_tensor_name(layer, what); };
  const int64_t q_rows = query_gate ? 2 * l.q_width() : l.q_width();
  v.matrix(wq, name("attn_q.weight"), hp.n_embd, q_rows);
  v.matrix(wk, name("attn_k.weight"), hp.n_embd, l.k_width());
  v.matrix(wv, name("attn_v.weight"), hp.n_embd, l.v_width());
  v.matrix(wo, name("attn_output.weight"), l.attn_out_width(), hp.n_embd);
  if (extra.qkv == QkvForm::separate_without_biases) {
    // none read
  } else if (query_gate) {
    v.without_effect(name("attn_q.bias"), q_rows, TensorKind::bias);
    v.without_effect(name("attn_k.bias"), l.k_width(), TensorKind::bias);
    v.without_effect(name("attn_v.bias"), l.v_width(), TensorKind::bias);
  } else if (extra.qkv_effect == QkvEffect::applied) {
    const bool required = extra.qkv == QkvForm::separate_with_biases;
    v.vector(bq, name("attn_q.bias"), l.q_width(), TensorKind::bias, required);
    v.vector(bk, name("attn_k.bias"), l.k_width(), TensorKind::bias, required);
    v.vector(bv, name("attn_v.bias"), l.v_width(), TensorKind::bias, required);
  } else {
    v.without_effect(name("attn_q.bias"), l.q_width(), TensorKind::bias);
    v.without_effect(name("attn_k.bias"), l.k_width(), TensorKind::bias);
    v.without_effect(name("attn_v.bias"), l.v_width(), TensorKind::bias);
  }
  visit_output_bias(v, hp, layer, extra);
  if (extra.qkv_effect == QkvEffect::applied) {
    v.scale(q_scale, name("attn_q.scale"));
    v.scale(k_scale, name("attn_k.scale"));
    v.scale(v_scale, name("attn_v.scale"));
  } else {
    for (const char* matrix : {"attn_q", "attn_k", "attn_v"}) {
      v.scale_without_effect(name(std::string(matrix) + ".scale"));
    }
  }
  v.scale(o_scale, name("attn_output.scale"));
  for (const char* input : {"attn_q", "attn_k", "attn_v", "attn_output"}) {
    v.scale_without_effect(name(std::string(input) + ".input_scale"));
  }
}

namespace {

// A product's scale (NAME.scale, llama.cpp's ggml_mul after the matmul); 1 is no-op.
void apply_scale(ForwardContext& ctx, Tensor rows, float scale) {
  if (scale != 1.0f) ctx.backend.scale(rows, scale);
}

// RMS norm of each head (a norm weight of head_dim values) or of the whole
// projection (a weight as wide as the row), in place.
void norm_heads(ForwardContext& ctx, Tensor row, std::span<const float> weight, float eps) {
  if (!weight.empty()) ctx.backend.rms_norm_rows(row, weight, eps, row, weight.size());
}

// Qwen3-Next's query product, per head [queries | gate], split into the
// queries and ForwardBuffers::attn_gate (each row q_width wide).
void split_query_gate(const LayerSpec& layer, std::span<const float> product, std::span<float> q,
                      ForwardBuffers& buf) {
  const auto qw = static_cast<size_t>(layer.q_width());
  const auto dim = static_cast<size_t>(layer.head_dim_k);
  const size_t rows = product.size() / (2 * qw);
  const auto gate = ForwardBuffers::take(buf.attn_gate, rows * qw);
  for (size_t r = 0; r < rows; ++r) {
    for (size_t h = 0; h < static_cast<size_t>(layer.n_head); ++h) {
      const float* src = product.data() + r * 2 * qw + h * 2 * dim;
      std::copy_n(src, dim, q.data() + r * qw + h * dim);
      std::copy_n(src + dim, dim, gate.data() + r * qw + h * dim);
    }
  }
}

// The Q/K norms of the kinds with a weight row per head or a layer norm
// (the plain RMS norms go through norm_heads), over every row at once: a
// table of per-head weights is taken head by head (kernels/cpu/norm.hpp).
void norm_per_head_or_layer(const AttentionWeights& w, const ModelHParams& hp,
                            const LayerSpec& layer, ForwardContext& ctx, Tensor q, Tensor k) {
  const auto dim = static_cast<size_t>(layer.head_dim_k);
  switch (w.qk_norm_kind) {
    case AttentionWeights::QkNormKind::rms_per_head:
      if (!w.q_norm.empty()) ctx.backend.rms_norm_rows(q, w.q_norm, hp.rms_eps, q, dim);
      if (!w.k_norm.empty()) ctx.backend.rms_norm_rows(k, w.k_norm, hp.rms_eps, k, dim);
      return;
    case AttentionWeights::QkNormKind::layer_per_head:
      if (!w.q_norm.empty()) ctx.backend.layer_norm_rows(q, w.q_norm, {}, hp.norm_eps, q, dim);
      if (!w.k_norm.empty()) ctx.backend.layer_norm_rows(k, w.k_norm, {}, hp.norm_eps, k, dim);
      return;
    case AttentionWeights::QkNormKind::layer_whole:
      // MPT: both norms when attn_q_norm is there (the K one perhaps
      // without weight), neither otherwise.
      if (!w.q_norm.empty()) {
        ctx.backend.layer_norm_rows(q, w.q_norm, w.q_norm_b, hp.norm_eps, q,
                                    static_cast<size_t>(layer.q_width()));
        ctx.backend.layer_norm_rows(k, w.k_norm, w.k_norm_b, hp.norm_eps, k,
                                    static_cast<size_t>(layer.k_width()));
      }
      return;
    case AttentionWeights::QkNormKind::rms:
      return;
  }
}

// Projects the normed rows to queries, keys and values, with scales, biases,
// Q/K norms and RoPE applied, in llama.cpp's order (build_qkv: matmul,
// scale, bias).
void project_qkv(const AttentionWeights& w, const ModelHParams& hp, const LayerSpec& layer,
                 const AttentionPass& pass, ForwardContext& ctx, ConstTensor normed, Tensor q,
                 Tensor k, Tensor v) {
  auto& buf = ctx.buffers;
  const auto n = static_cast<int64_t>(pass.rows.size());
  const auto rows = pass.rows.size();
  const auto qw = static_cast<size_t>(layer.q_width());
  const auto kw = static_cast<size_t>(layer.k_width());
  const auto vw = static_cast<size_t>(layer.v_width());
  if (!w.wqkv.empty()) {
    // build_qkv's fused path: one product, its scale and bias, then Q, K
    // and V are views of each row (copied out here).
    const auto width = qw + kw + vw;
    const Tensor fused = ctx.backend.scratch(buf.qkv, rows * width);
    ctx.backend.matmul(w.wqkv, normed, n, fused, static_cast<int64_t>(width));
    apply_scale(ctx, fused, w.qkv_scale);
    ctx.backend.add_bias_rows(fused, w.bqkv);
    if (hp.clamp_kqv > 0.0f) ctx.backend.clamp(fused, -hp.clamp_kqv, hp.clamp_kqv);
    const size_t tail = rows * width;  // each view's rows end within the product
    ctx.backend.copy_rows(fused, width, q, qw, qw, rows);
    ctx.backend.copy_rows(fused.subspan(qw, tail - qw), width, k, kw, kw, rows);
    ctx.backend.copy_rows(fused.subspan(qw + kw, tail - qw - kw), width, v, vw, vw, rows);
  } else {
    // With a query gate, Q's product holds each head's queries and gate.
    const int64_t q_rows = w.query_gate ? 2 * layer.q_width() : layer.q_width();
    const Tensor q_product =
        w.query_gate ? Tensor(ForwardBuffers::take(buf.qkv, rows * static_cast<size_t>(q_rows)))
                     : q;
    const MatmulProduct qkv[] = {
        {&w.wq, q_product, q_rows}, {&w.wk, k, layer.k_width()}, {&w.wv, v, layer.v_width()}};
    ctx.backend.matmul_shared_input(qkv, normed, n);
    apply_scale(ctx, q_product, w.q_scale);
    if (w.query_gate) split_query_gate(layer, q_product, q, buf);
    apply_scale(ctx, k, w.k_scale);
    apply_scale(ctx, v, w.v_scale);
    ctx.backend.add_bias_rows(q, w.bq);
    ctx.backend.add_bias_rows(k, w.bk);
    ctx.backend.add_bias_rows(v, w.bv);
    if (hp.clamp_kqv > 0.0f) {
      for (const Tensor m : {q, k, v}) {
        ctx.backend.clamp(m, -hp.clamp_kqv, hp.clamp_kqv);
      }
    }
  }
  const RopeTable* rope =
      layer.rope == RopeSlot::none ? nullptr : &pass.rope[static_cast<size_t>(layer.rope)];
  // Every step is row by row, so the rows may go through each in turn.
  using Kind = AttentionWeights::QkNormKind;
  if (w.qk_norm_kind == Kind::rms && !w.qk_norm_after_rope) {
    norm_heads(ctx, q, w.q_norm, hp.rms_eps);
    norm_heads(ctx, k, w.k_norm, hp.rms_eps);
  } else if (w.qk_norm_kind != Kind::rms) {
    norm_per_head_or_layer(w, hp, layer, ctx, q, k);
  }
  if (rope != nullptr) {
    ctx.backend.rope_rows(q, rows, layer.n_head, layer.head_dim_k, *rope->params, rope->cache);
    ctx.backend.rope_rows(k, rows, layer.n_head_kv, layer.head_dim_k, *rope->params, rope->cache);
  }
  // Hunyuan, Maincoder: the RMS norms see the rotated heads.
  if (w.qk_norm_after_rope) {
    norm_heads(ctx, q, w.q_norm, hp.rms_eps);
    norm_heads(ctx, k, w.k_norm, hp.rms_eps);
  }
  // Llama 4: each rotated head RMS-normed without a weight.
  if (w.qk_plain_norm_after_rope && rope != nullptr) {
    const auto dim = static_cast<size_t>(layer.head_dim_k);
    ctx.backend.rms_norm_rows(q, {}, hp.rms_eps, q, dim);
    ctx.backend.rms_norm_rows(k, {}, hp.rms_eps, k, dim);
  }
  // The queries times the temperature (Llama 4: the unrotated layers').
  if (rope == nullptr || !hp.attn_temperature.unrotated_layers_only) {
    scale_by_temperature(hp, pass.rows, ctx, q, qw);
  }
  // Gemma scales the queries (ggml_scale after RoPE), not the scores.
  if (hp.scale_queries) ctx.backend.scale(q, hp.kq_scale(layer));
}

// The attention of every row over its sequence's cached positions (the
// backend's attention op: causal, within the layer's window or chunk, or
// bidirectional over every position its sequence has after the pass).
void attend(const ModelHParams& hp, const LayerSpec& layer, int64_t il, const AttentionPass& pass,
            const KvCache& cache, ForwardContext& ctx, ConstTensor q, Tensor out,
            std::span<const float> sinks = {}) {
  AttentionOp op{.rows = pass.rows,
                 .layer = il,
                 .shape = {layer.n_head, layer.n_head_kv, layer.head_dim_k, layer.head_dim_v,
                           hp.scale_queries ? 1.0f : hp.kq_scale(layer)},
                 .window = layer.window,
                 .chunk = layer.chunk,
                 .causal = hp.causal_attention};
  op.shape.softcap = hp.attn_softcap;
  op.shape.softcap_scale = hp.attn_softcap_scale;
  op.shape.alibi_max_bias = hp.alibi_max_bias;
  op.shape.sinks = sinks;
  ctx.backend.attention(op, cache, q, out);
}

}  // namespace

void scale_by_temperature(const ModelHParams& hp, std::span<const BatchRow> rows,
                          ForwardContext& ctx, Tensor q, size_t width) {
  if (hp.attn_temperature.scale == 0.0f) return;
  for (size_t r = 0; r < rows.size(); ++r) {
    ctx.backend.scale(q.subspan(r * width, width), attention_temperature(hp, rows[r].pos));
  }
}

float attention_temperature(const ModelHParams& hp, int32_t pos) {
  const auto& temp = hp.attn_temperature;
  if (temp.scale == 0.0f) return 1.0f;
  const float steps =
      std::floor((static_cast<float>(pos) + temp.offset) / static_cast<float>(temp.floor_scale));
  return static_cast<float>(std::log(steps + 1.0) * temp.scale + 1.0);
}

namespace {

// attn[r] *= softplus(gate · in[r]), broadcast over each head's values when
// the gate has one row per head (llama.cpp's ggml_mul after ggml_softplus).
void apply_softplus_gate(const AttentionWeights& w, const ModelHParams& hp, const LayerSpec& spec,
                         ForwardContext& ctx, ConstTensor in, Tensor attn) {
  const size_t width = static_cast<size_t>(spec.attn_out_width());
  const size_t rows = attn.size() / width;
  const int64_t n_gate = w.gate_per_head ? spec.n_head : spec.attn_out_width();
  const Tensor gate = ctx.backend.scratch(ctx.buffers.gate, rows * static_cast<size_t>(n_gate));
  ctx.backend.matmul(w.gate, in.first(rows * static_cast<size_t>(hp.n_embd)),
                     static_cast<int64_t>(rows), gate, n_gate);
  ctx.backend.unary(UnaryOp::softplus, gate);
  // Each head's values (or each value) times its gate.
  const size_t per_gate = w.gate_per_head ? static_cast<size_t>(spec.head_dim_v) : 1;
  ctx.backend.scale_rows(attn, gate, per_gate);
}

}  // namespace

void attend_over_cache(const ModelHParams& hp, int64_t layer, const AttentionPass& pass,
                       const KvCache& cache, ForwardContext& ctx, ConstTensor q, Tensor out) {
  attend(hp, hp.layer(layer), layer, pass, cache, ctx, q, out);
}

void attention(const AttentionWeights& w, const ModelHParams& hp, int64_t layer,
               const AttentionPass& pass, KvCache& cache, ForwardContext& ctx, ConstTensor in,
               Tensor out) {
  auto& buf = ctx.buffers;
  auto& backend = ctx.backend;
  const LayerSpec& spec = hp.layer(layer);
  const auto rows = pass.rows.size();
  const Tensor q = backend.scratch(buf.q, rows * static_cast<size_t>(spec.q_width()));
  const Tensor k = backend.scratch(buf.k, rows * static_cast<size_t>(spec.k_width()));
  const Tensor v = backend.scratch(buf.v, rows * static_cast<size_t>(spec.v_width()));
  const Tensor attn =
      backend.scratch(buf.attn_out, rows * static_cast<size_t>(spec.attn_out_width()));

  project_qkv(w, hp, spec, pass, ctx, in, q, k, v);
  ctx.backend.store_kv(cache, layer, pass.cells, k, v, static_cast<size_t>(spec.k_width()),
                       static_cast<size_t>(spec.v_width()));
  attend(hp, spec, layer, pass, cache, ctx, q, attn, w.sinks);
  if (!w.gate.empty()) apply_softplus_gate(w, hp, spec, ctx, in, attn);
  if (w.query_gate) {
    // llama.cpp's ggml_mul of the output by ggml_sigmoid(gate).
    const std::span<float> values = attn;
    const auto gate = std::span(buf.attn_gate).first(values.size());
    for (size_t i = 0; i < values.size(); ++i) values[i] *= kernels::sigmoid(gate[i]);
  }
  if (!w.sub_norm.empty()) {
    ctx.backend.rms_norm_rows(attn, w.sub_norm, hp.rms_eps, attn, w.sub_norm.size());
  }
  const auto out_rows = out.first(rows * static_cast<size_t>(hp.n_embd));
  ctx.backend.matmul(w.wo, attn, static_cast<int64_t>(rows), out_rows, hp.n_embd);
  apply_scale(ctx, out_rows, w.o_scale);
  ctx.backend.add_bias_rows(out_rows, w.bo);
  if (hp.attn_output_scale != 0.0f) ctx.backend.scale(out_rows, hp.attn_output_scale);
}

}  // namespace cortiq
