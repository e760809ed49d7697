#include "model/blocks/attention.hpp"

#include <algorithm>
#include <array>
#include <cmath>

#include "base/thread_pool.hpp"
#include "kernels/cpu/activations.hpp"
#include "kernels/cpu/attention.hpp"
#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/norm.hpp"
#include "model/tensor_table.hpp"
#include "runtime/kv_cache.hpp"

namespace cortiq {

void AttentionWeights::visit(TensorVisitor& v, const ModelHParams& hp, int64_t layer,
                             AttentionTensors extra) {
  const LayerSpec& l = hp.layer(layer);
  const auto name = [&](std::string_view what) { return layer_tensor_name(layer, what); };
  // llama.cpp's create_tensor_qkv: attn_qkv.weight when the file has it
  // (with its optional bias; the generic pass reads its .scale and
  // .input_scale), else Q/K/V with theirs. Families whose graph projects
  // without build_qkv (OLMo2) never read the fused one.
  const bool fused_readable = extra.qkv_biases_and_scales_applied || extra.unapplied_fused_qkv;
  query_gate = extra.sigmoid_gated_query;
  const bool fused = !query_gate && (extra.fused_qkv_required ||
                                     (fused_readable && !extra.separate_qkv_with_biases &&
                                      !extra.separate_qkv_without_biases &&
                                      v.has(name("attn_qkv.weight"), extra.fused_qkv_written)));
  qk_norm_after_rope = extra.qk_norm_after_rope;
  qk_plain_norm_after_rope = extra.qk_plain_norm_after_rope;
  if (extra.sinks) v.vector(sinks, name("attn_sinks.weight"), l.n_head, TensorKind::bias);
  if (extra.softplus_gate) visit_softplus_gate(v, hp, layer, extra);
  if (extra.sub_norm) {
    v.vector(sub_norm, name("attn_sub_norm.weight"), l.attn_out_width(), TensorKind::norm);
  }
  if (fused) {
    const int64_t width = l.q_width() + l.k_width() + l.v_width();
    v.matrix(wqkv, name("attn_qkv.weight"), hp.n_embd, width);
    // OpenELM's graph projects with the bare matrix: no bias is read.
    if (extra.qkv_biases_and_scales_applied && extra.fused_qkv_bias != FusedQkvBias::none) {
      v.vector(bqkv, name("attn_qkv.bias"), width, TensorKind::bias,
               extra.fused_qkv_bias == FusedQkvBias::required);
    } else if (extra.unapplied_fused_qkv) {
      v.without_effect(name("attn_qkv.bias"), width, TensorKind::bias);
    }
    v.matrix(wo, name("attn_output.weight"), l.attn_out_width(), hp.n_embd);
    if (extra.output_bias || extra.output_bias_required) {
      v.vector(bo, name("attn_output.bias"), hp.n_embd, TensorKind::bias,
               extra.output_bias_required);
    }
    if (extra.qkv_biases_and_scales_applied) {
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
  if (extra.qk_layer_norm_whole) {
    // MPT's optional layer norms over the whole Q and K projections.
    qk_norm_kind = QkNormKind::layer_whole;
    v.vector(q_norm, name("attn_q_norm.weight"), l.q_width(), TensorKind::norm, false);
    v.vector(q_norm_b, name("attn_q_norm.bias"), l.q_width(), TensorKind::bias, false);
    v.vector(k_norm, name("attn_k_norm.weight"), l.k_width(), TensorKind::norm, false);
    v.vector(k_norm_b, name("attn_k_norm.bias"), l.k_width(), TensorKind::bias, false);
  }
  if (extra.qk_norm != QkNorm::none &&
      (extra.qk_layer_norm_per_head || extra.qk_rms_norm_per_head)) {
    qk_norm_kind =
        extra.qk_rms_norm_per_head ? QkNormKind::rms_per_head : QkNormKind::layer_per_head;
    const bool required = extra.qk_norm == QkNorm::required;
    v.table(q_norm, name("attn_q_norm.weight"), l.head_dim_k, l.n_head, TensorKind::norm, required);
    v.table(k_norm, name("attn_k_norm.weight"), l.head_dim_k, l.n_head_kv, TensorKind::norm,
            required);
  } else if (extra.qk_norm != QkNorm::none) {
    const bool required = extra.qk_norm == QkNorm::required;
    v.vector(q_norm, name("attn_q_norm.weight"), extra.qk_norm_whole ? l.q_width() : l.head_dim_k,
             TensorKind::norm, required);
    v.vector(k_norm, name("attn_k_norm.weight"), extra.qk_norm_whole ? l.k_width() : l.head_dim_k,
             TensorKind::norm, required);
  }
}

void AttentionWeights::visit_softplus_gate(TensorVisitor& v, const ModelHParams& hp, int64_t layer,
                                           AttentionTensors extra) {
  const LayerSpec& l = hp.layer(layer);
  const std::string name = layer_tensor_name(layer, "attn_gate.weight");
  const int64_t written = extra.softplus_gate_per_element_written ? l.attn_out_width() : l.n_head;
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
  if (extra.separate_qkv_without_biases) {
    // none read
  } else if (query_gate) {
    v.without_effect(name("attn_q.bias"), q_rows, TensorKind::bias);
    v.without_effect(name("attn_k.bias"), l.k_width(), TensorKind::bias);
    v.without_effect(name("attn_v.bias"), l.v_width(), TensorKind::bias);
  } else if (extra.qkv_biases_and_scales_applied) {
    const bool required = extra.separate_qkv_with_biases;
    v.vector(bq, name("attn_q.bias"), l.q_width(), TensorKind::bias, required);
    v.vector(bk, name("attn_k.bias"), l.k_width(), TensorKind::bias, required);
    v.vector(bv, name("attn_v.bias"), l.v_width(), TensorKind::bias, required);
  } else {
    v.without_effect(name("attn_q.bias"), l.q_width(), TensorKind::bias);
    v.without_effect(name("attn_k.bias"), l.k_width(), TensorKind::bias);
    v.without_effect(name("attn_v.bias"), l.v_width(), TensorKind::bias);
  }
  if (extra.output_bias || extra.output_bias_required) {
    v.vector(bo, name("attn_output.bias"), hp.n_embd, TensorKind::bias, extra.output_bias_required);
  }
  if (extra.qkv_biases_and_scales_applied) {
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
void apply_scale(std::span<float> rows, float scale) {
  if (scale != 1.0f) kernels::scale_inplace(rows, scale);
}

// RMS norm of each head (a norm weight of head_dim values) or of the whole
// projection (a weight as wide as the row), in place.
void norm_heads(std::span<float> row, std::span<const float> weight, float eps) {
  if (!weight.empty()) kernels::rms_norm_rows(row, weight, eps, row, weight.size());
}

// RMS norm of each head_dim-wide head of `row`, each head with its own
// weight row (`weight` as wide as the row), in place.
void rms_norm_heads(std::span<float> row, std::span<const float> weight, int64_t head_dim,
                    float eps) {
  const auto width = static_cast<size_t>(head_dim);
  for (size_t start = 0; start < row.size(); start += width) {
    const auto head = row.subspan(start, width);
    kernels::rms_norm_rows(head, weight.subspan(start, width), eps, head, width);
  }
}

// Layer norm of each head_dim-wide head of `row` (no bias), each head with
// its own weight row (`weight` as wide as the row), in place.
void layer_norm_heads(std::span<float> row, std::span<const float> weight, int64_t head_dim,
                      float eps) {
  if (weight.empty()) return;
  const auto width = static_cast<size_t>(head_dim);
  for (size_t start = 0; start < row.size(); start += width) {
    const auto head = row.subspan(start, width);
    kernels::layer_norm(head, weight.subspan(start, width), {}, eps, head);
  }
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

// Projects the normed rows to queries, keys and values, with scales, biases,
// Q/K norms and RoPE applied, in llama.cpp's order (build_qkv: matmul,
// scale, bias).
void project_qkv(const AttentionWeights& w, const ModelHParams& hp, const LayerSpec& layer,
                 const AttentionPass& pass, ForwardContext& ctx, std::span<const float> normed,
                 std::span<float> q, std::span<float> k, std::span<float> v) {
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
    auto fused = ForwardBuffers::take(buf.qkv, rows * width);
    kernels::matmul(w.wqkv, normed, n, fused, static_cast<int64_t>(width), ctx.pool, buf.matmul);
    apply_scale(fused, w.qkv_scale);
    kernels::add_bias_rows(fused, w.bqkv);
    if (hp.clamp_kqv > 0.0f) kernels::clamp_inplace(fused, -hp.clamp_kqv, hp.clamp_kqv);
    for (size_t r = 0; r < rows; ++r) {
      const auto row = fused.subspan(r * width, width);
      // Plain loops: g++ 12 warns falsely (-Wstringop-overflow) on copies here.
      for (size_t i = 0; i < qw; ++i) q[r * qw + i] = row[i];
      for (size_t i = 0; i < kw; ++i) k[r * kw + i] = row[qw + i];
      for (size_t i = 0; i < vw; ++i) v[r * vw + i] = row[qw + kw + i];
    }
  } else {
    // With a query gate, Q's product holds each head's queries and gate.
    const int64_t q_rows = w.query_gate ? 2 * layer.q_width() : layer.q_width();
    const auto q_product =
        w.query_gate ? ForwardBuffers::take(buf.qkv, rows * static_cast<size_t>(q_rows)) : q;
    const kernels::MatmulOutput qkv[] = {
        {&w.wq, q_product, q_rows}, {&w.wk, k, layer.k_width()}, {&w.wv, v, layer.v_width()}};
    kernels::matmul_shared_input(qkv, normed, n, ctx.pool, buf.matmul);
    apply_scale(q_product, w.q_scale);
    if (w.query_gate) split_query_gate(layer, q_product, q, buf);
    apply_scale(k, w.k_scale);
    apply_scale(v, w.v_scale);
    kernels::add_bias_rows(q, w.bq);
    kernels::add_bias_rows(k, w.bk);
    kernels::add_bias_rows(v, w.bv);
    if (hp.clamp_kqv > 0.0f) {
      for (const std::span<float> m : {q, k, v}) {
        kernels::clamp_inplace(m, -hp.clamp_kqv, hp.clamp_kqv);
      }
    }
  }
  const RopeTable* rope =
      layer.rope == RopeSlot::none ? nullptr : &pass.rope[static_cast<size_t>(layer.rope)];
  for (size_t r = 0; r < rows; ++r) {
    auto q_row = q.subspan(r * qw, qw);
    auto k_row = k.subspan(r * kw, kw);
    if (w.qk_norm_kind == AttentionWeights::QkNormKind::rms_per_head) {
      rms_norm_heads(q_row, w.q_norm, layer.head_dim_k, hp.rms_eps);
      rms_norm_heads(k_row, w.k_norm, layer.head_dim_k, hp.rms_eps);
    } else if (w.qk_norm_kind == AttentionWeights::QkNormKind::layer_per_head) {
      layer_norm_heads(q_row, w.q_norm, layer.head_dim_k, hp.norm_eps);
      layer_norm_heads(k_row, w.k_norm, layer.head_dim_k, hp.norm_eps);
    } else if (w.qk_norm_kind == AttentionWeights::QkNormKind::layer_whole) {
      // MPT: both norms when attn_q_norm is there (the K one perhaps
      // without weight), neither otherwise.
      if (!w.q_norm.empty()) {
        kernels::layer_norm(q_row, w.q_norm, w.q_norm_b, hp.norm_eps, q_row);
        kernels::layer_norm(k_row, w.k_norm, w.k_norm_b, hp.norm_eps, k_row);
      }
    } else if (!w.qk_norm_after_rope) {
      norm_heads(q_row, w.q_norm, hp.rms_eps);
      norm_heads(k_row, w.k_norm, hp.rms_eps);
    }
    if (rope != nullptr) {
      const auto dims = static_cast<size_t>(rope->params->n_dims);
      const auto cache = rope->cache.subspan(r * dims, dims);
      kernels::rope_apply(q_row, layer.n_head, layer.head_dim_k, *rope->params, cache);
      kernels::rope_apply(k_row, layer.n_head_kv, layer.head_dim_k, *rope->params, cache);
    }
    // Hunyuan, Maincoder: the RMS norms see the rotated heads.
    if (w.qk_norm_after_rope) {
      norm_heads(q_row, w.q_norm, hp.rms_eps);
      norm_heads(k_row, w.k_norm, hp.rms_eps);
    }
    // Llama 4: each rotated head RMS-normed without a weight.
    if (w.qk_plain_norm_after_rope && rope != nullptr) {
      const auto dim = static_cast<size_t>(layer.head_dim_k);
      kernels::rms_norm_rows(q_row, {}, hp.rms_eps, q_row, dim);
      kernels::rms_norm_rows(k_row, {}, hp.rms_eps, k_row, dim);
    }
    // The queries times the temperature (Llama 4: the unrotated layers').
    const auto& temp = hp.attn_temperature;
    if (temp.scale != 0.0f && (rope == nullptr || !temp.unrotated_layers_only)) {
      kernels::scale_inplace(q_row, attention_temperature(hp, pass.rows[r].pos));
    }
  }
  // Gemma scales the queries (ggml_scale after RoPE), not the scores.
  if (hp.scale_queries) kernels::scale_inplace(q, hp.kq_scale(layer));
}

// Query rows computed together by attention_rows: consecutive rows of one
// sequence share its cache rows' loads.
constexpr int64_t kAttentionRowTile = 16;

// One row's heads [h0, h1) of KV head kh: attention_rows over views that
// start at those heads, as a layer of h1 - h0 heads sharing one KV head.
// Each head's result is computed alone, so the bits are those of the
// whole KV head's call.
void attend_head_range(std::span<const float> q_row, int64_t kv_start, int64_t n_kv,
                       kernels::KvRowsView keys, kernels::KvRowsView values,
                       const kernels::AttentionShape& shape, int64_t kh, int64_t h0, int64_t h1,
                       std::span<float> out_row, std::span<float> scratch) {
  const int64_t group = shape.n_head / shape.n_head_kv;
  const int64_t first = kh * group + h0, n = h1 - h0;
  const auto dk = static_cast<size_t>(shape.head_dim_k), dv = static_cast<size_t>(shape.head_dim_v);
  keys.base += static_cast<size_t>(kh) * dk * (keys.f16 ? 2 : 4);
  values.base += static_cast<size_t>(kh) * dv * (values.f16 ? 2 : 4);
  kernels::AttentionShape part = shape;
  part.n_head = n;
  part.n_head_kv = 1;
  if (!shape.sinks.empty()) part.sinks = shape.sinks.subspan(static_cast<size_t>(first), n);
  const int64_t start[] = {kv_start}, count[] = {n_kv};
  kernels::attention_rows(q_row.subspan(static_cast<size_t>(first) * dk, n * dk), start, count,
                          keys, values, part,
                          out_row.subspan(static_cast<size_t>(first) * dv, n * dv), scratch, 0, 1);
}

// Causal attention of every row over positions [start, pos] of its
// sequence, start = 0 or, in a sliding-window layer, pos - window + 1
// (bidirectional: over every position of its sequence after the pass).
// Rows are cut into tiles (consecutive rows of one sequence, at most
// kAttentionRowTile), and the work units are (tile, KV head) pairs: unit i
// goes to slot i % n_slots, a few slots per thread, each to whichever thread
// is free. Later rows attend to more positions, so interleaving keeps the
// slots even; splitting by KV head keeps both cores busy at decode, where
// there is a single row.
void attend(const ModelHParams& hp, const LayerSpec& layer, int64_t il, const AttentionPass& pass,
            const KvCache& cache, ForwardContext& ctx, std::span<const float> q,
            std::span<float> out, std::span<const float> sinks = {}) {
  auto& buf = ctx.buffers;
  const int n_threads = ctx.pool.size();
  kernels::AttentionShape shape{layer.n_head, layer.n_head_kv, layer.head_dim_k, layer.head_dim_v,
                                hp.scale_queries ? 1.0f : hp.kq_scale(layer)};
  shape.softcap = hp.attn_softcap;
  shape.softcap_scale = hp.attn_softcap_scale;
  shape.alibi_max_bias = hp.alibi_max_bias;
  shape.sinks = sinks;
  int64_t max_kv = 0;
  for (const auto& row : pass.rows) max_kv = std::max<int64_t>(max_kv, row.pos + 1);
  // A tile's rows are consecutive positions of one sequence: with a window
  // they span at most window + tile - 1 positions.
  const int64_t limit = layer.window > 0 ? layer.window : layer.chunk;
  const int64_t max_span = limit > 0 ? std::min(max_kv, limit + kAttentionRowTile - 1) : max_kv;
  if (buf.scores.size() < static_cast<size_t>(n_threads)) buf.scores.resize(n_threads);
  for (auto& s : buf.scores) {
    ForwardBuffers::take(s, kernels::attention_scratch_floats(shape, kAttentionRowTile, max_span));
  }
  const auto qw = static_cast<size_t>(layer.q_width());
  const auto ow = static_cast<size_t>(layer.attn_out_width());
  const size_t n = pass.rows.size();
  const auto n_kv_heads = static_cast<size_t>(layer.n_head_kv);
  // A lone row (decode) with fewer KV heads than threads: each KV head's
  // query heads are shared out, so that every thread works (MQA and latent
  // attention have one KV head). Not with ALiBi, whose slopes number the
  // heads of the whole layer.
  const int64_t group = layer.n_head / layer.n_head_kv;
  const int64_t lone_row_parts =
      static_cast<int64_t>(n_kv_heads) < n_threads && hp.alibi_max_bias == 0.0f
          ? std::min<int64_t>(group, (n_threads + layer.n_head_kv - 1) / layer.n_head_kv)
          : 1;
  // Bidirectional attention (encoders): every row reads every position its
  // sequence has after the pass, so a sequence must come in one pass.
  std::vector<int64_t> seq_end;
  if (!hp.causal_attention) {
    for (const auto& row : pass.rows) {
      const auto seq = static_cast<size_t>(row.seq);
      if (seq >= seq_end.size()) seq_end.resize(seq + 1, 0);
      seq_end[seq] = std::max<int64_t>(seq_end[seq], row.pos + 1);
    }
  }
  const int64_t n_slots = n_threads * ThreadPool::kChunksPerThread;
  ctx.pool.run_slots(n_slots, [&](int64_t slot, int thread) {
    auto& scratch = buf.scores[static_cast<size_t>(thread)];
    std::array<int64_t, kAttentionRowTile> n_kv, kv_start;
    size_t unit = 0;
    for (size_t begin = 0; begin < n;) {
      size_t end = begin + 1;
      while (end < n && end - begin < kAttentionRowTile &&
             pass.rows[end].seq == pass.rows[begin].seq) {
        ++end;
      }
      for (size_t r = begin; r < end; ++r) {
        n_kv[r - begin] = hp.causal_attention ? pass.rows[r].pos + 1
                                              : seq_end[static_cast<size_t>(pass.rows[r].seq)];
        kv_start[r - begin] = layer.window > 0
                                  ? std::max<int64_t>(0, n_kv[r - begin] - layer.window)
                              : layer.chunk > 0 ? pass.rows[r].pos / layer.chunk * layer.chunk
                                                : 0;
      }
      const int32_t seq = pass.rows[begin].seq;
      const int64_t parts = end - begin == 1 ? lone_row_parts : 1;
      for (size_t kh = 0; kh < n_kv_heads; ++kh) {
        for (int64_t part = 0; part < parts; ++part, ++unit) {
          if (unit % static_cast<size_t>(n_slots) != static_cast<size_t>(slot)) continue;
          if (parts > 1) {
            attend_head_range(q.subspan(begin * qw, qw), kv_start[0], n_kv[0], cache.keys(il, seq),
                              cache.values(il, seq), shape, static_cast<int64_t>(kh),
                              group * part / parts, group * (part + 1) / parts,
                              out.subspan(begin * ow, ow), scratch);
            continue;
          }
          kernels::attention_rows(
              q.subspan(begin * qw, (end - begin) * qw), std::span(kv_start).first(end - begin),
              std::span(n_kv).first(end - begin), cache.keys(il, seq), cache.values(il, seq), shape,
              out.subspan(begin * ow, (end - begin) * ow), scratch, static_cast<int64_t>(kh),
              static_cast<int64_t>(kh) + 1);
        }
      }
      begin = end;
    }
  });
}

}  // namespace

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
                         ForwardContext& ctx, std::span<const float> in, std::span<float> attn) {
  const size_t width = static_cast<size_t>(spec.attn_out_width());
  const size_t rows = attn.size() / width;
  const int64_t n_gate = w.gate_per_head ? spec.n_head : spec.attn_out_width();
  const auto gate = ForwardBuffers::take(ctx.buffers.gate, rows * static_cast<size_t>(n_gate));
  kernels::matmul(w.gate, in.first(rows * static_cast<size_t>(hp.n_embd)),
                  static_cast<int64_t>(rows), gate, n_gate, ctx.pool, ctx.buffers.matmul);
  kernels::softplus_inplace(gate);
  const size_t per_gate = w.gate_per_head ? static_cast<size_t>(spec.head_dim_v) : 1;
  for (size_t i = 0; i < attn.size(); ++i) attn[i] *= gate[i / per_gate];
}

}  // namespace

void attend_over_cache(const ModelHParams& hp, int64_t layer, const AttentionPass& pass,
                       const KvCache& cache, ForwardContext& ctx, std::span<const float> q,
                       std::span<float> out) {
  attend(hp, hp.layer(layer), layer, pass, cache, ctx, q, out);
}

void attention(const AttentionWeights& w, const ModelHParams& hp, int64_t layer,
               const AttentionPass& pass, KvCache& cache, ForwardContext& ctx,
               std::span<const float> in, std::span<float> out) {
  auto& buf = ctx.buffers;
  const LayerSpec& spec = hp.layer(layer);
  const auto rows = pass.rows.size();
  auto q = ForwardBuffers::take(buf.q, rows * static_cast<size_t>(spec.q_width()));
  auto k = ForwardBuffers::take(buf.k, rows * static_cast<size_t>(spec.k_width()));
  auto v = ForwardBuffers::take(buf.v, rows * static_cast<size_t>(spec.v_width()));
  auto attn = ForwardBuffers::take(buf.attn_out, rows * static_cast<size_t>(spec.attn_out_width()));

  project_qkv(w, hp, spec, pass, ctx, in, q, k, v);
  const auto kw = static_cast<size_t>(spec.k_width());
  const auto vw = static_cast<size_t>(spec.v_width());
  for (size_t r = 0; r < rows; ++r) {
    cache.store_k(layer, pass.cells[r], k.subspan(r * kw, kw));
    cache.store_v(layer, pass.cells[r], v.subspan(r * vw, vw));
  }
  attend(hp, spec, layer, pass, cache, ctx, q, attn, w.sinks);
  if (!w.gate.empty()) apply_softplus_gate(w, hp, spec, ctx, in, attn);
  if (w.query_gate) {
    // llama.cpp's ggml_mul of the output by ggml_sigmoid(gate).
    const auto gate = std::span(buf.attn_gate).first(attn.size());
    for (size_t i = 0; i < attn.size(); ++i) attn[i] *= kernels::sigmoid(gate[i]);
  }
  if (!w.sub_norm.empty()) {
    kernels::rms_norm_rows(attn, w.sub_norm, hp.rms_eps, attn, w.sub_norm.size());
  }
  const auto out_rows = out.first(rows * static_cast<size_t>(hp.n_embd));
  kernels::matmul(w.wo, attn, static_cast<int64_t>(rows), out_rows, hp.n_embd, ctx.pool,
                  buf.matmul);
  apply_scale(out_rows, w.o_scale);
  kernels::add_bias_rows(out_rows, w.bo);
  if (hp.attn_output_scale != 0.0f) kernels::scale_inplace(out_rows, hp.attn_output_scale);
}

}  // namespace cortiq
