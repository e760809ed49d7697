#include "model/blocks/embedding.hpp"

#include <algorithm>
#include <cmath>

#include "base/thread_pool.hpp"
#include "kernels/cpu/activations.hpp"
#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/norm.hpp"
#include "model/tensor_table.hpp"

namespace cortiq {

void TokenEmbedding::visit(TensorVisitor& v, const ModelHParams& hp) {
  v.matrix(table, "token_embd.weight", hp.n_embd, hp.n_vocab);
}

void TokenEmbedding::embed(const ModelHParams& hp, std::span<const BatchRow> rows, Tensor x,
                           ForwardContext& ctx) const {
  auto& ids = ctx.buffers.token_ids;
  ids.clear();
  for (const auto& row : rows) ids.push_back(row.token);
  ctx.backend.get_rows(table, ids, x);
  if (hp.embedding_scale != 0.0f) {
    ctx.backend.scale(x.first(rows.size() * static_cast<size_t>(hp.n_embd)), hp.embedding_scale);
  }
  ctx.backend.add_bias_rows(x.first(rows.size() * static_cast<size_t>(hp.n_embd)), type0);
  if (positions.data != nullptr) {
    // llama.cpp adds ggml_get_rows(pos_embd, inp_pos). The branch buffer
    // (buf.proj) is free until the first layer; get_rows refuses a position
    // beyond the table.
    ids.clear();
    for (const auto& row : rows) ids.push_back(row.pos);
    const auto width = rows.size() * static_cast<size_t>(hp.n_embd);
    const Tensor pos = ctx.backend.scratch(ctx.buffers.proj, width);
    ctx.backend.get_rows(positions, ids, pos);
    ctx.backend.add(x.first(width), pos);
  }
}

void TokenEmbedding::visit_positions(TensorVisitor& v, const ModelHParams& hp, bool required) {
  v.matrix(positions, "position_embd.weight", hp.n_embd, hp.n_ctx_train, required);
}

void TokenEmbedding::visit_token_types(TensorVisitor& v, const ModelHParams& hp) {
  // A small f32 table (llama.cpp's quantizer keeps it f32 and adds a view of
  // its first row): only that row is kept.
  v.table(type0, "token_types.weight", hp.n_embd, hp.n_token_types, TensorKind::bias,
          /*required=*/false);
  type0.resize(std::min(type0.size(), static_cast<size_t>(hp.n_embd)));
}

void copy_output_rows(const ModelHParams& hp, std::span<const BatchRow> rows, ConstTensor x,
                      ForwardContext& ctx, std::span<float> out) {
  const auto n_embd = static_cast<size_t>(hp.n_embd);
  const LayerStage& stage = ctx.stage;
  if (!stage.ends_in_head()) {
    if (stage.width == hp.n_embd) {
      ctx.backend.copy_to_host(x.first(rows.size() * n_embd), out.first(rows.size() * n_embd));
    } else {
      stage.write_output(x, n_embd, out);
    }
    return;
  }
  size_t k = 0;
  for (size_t r = 0; r < rows.size();) {
    if (!rows[r].logits) {
      ++r;
      continue;
    }
    size_t run = 1;
    while (r + run < rows.size() && rows[r + run].logits) ++run;
    ctx.backend.copy_to_host(x.subspan(r * n_embd, run * n_embd),
                             out.subspan(k * n_embd, run * n_embd));
    k += run;
    r += run;
  }
}

void OutputHead::visit(TensorVisitor& v, const ModelHParams& hp, const TokenEmbedding& embedding,
                       OutputMatrix matrix, OutputBias bias_kind, NormKind norm_kind,
                       bool norm_bias_required) {
  norm.visit(
      v, std::string(norm_name), hp.n_embd, norm_kind,
      norm_kind == NormKind::rms || norm_kind == NormKind::rms_with_bias ? hp.rms_eps : hp.norm_eps,
      norm_bias_required);
  if (matrix != OutputMatrix::always_tied) {
    v.matrix(output, "output.weight", hp.n_embd, hp.n_vocab,
             /*required=*/matrix == OutputMatrix::own);
  }
  if (output.data == nullptr) output = embedding.table;
  if (bias_kind != OutputBias::none) {
    v.vector(bias, "output.bias", hp.n_vocab, TensorKind::bias,
             /*required=*/bias_kind == OutputBias::required);
  }
}

void OutputHead::apply(const ModelHParams& hp, std::span<const BatchRow> rows, ConstTensor x,
                       ForwardContext& ctx, std::span<float> logits) const {
  auto& buf = ctx.buffers;
  auto& backend = ctx.backend;
  const auto n_embd = static_cast<size_t>(hp.n_embd);
  if (!ctx.stage.ends_in_head()) {
    if (ctx.stage.width == hp.n_embd) {
      const size_t n = rows.size() * n_embd;
      backend.copy_to_host(x.first(n), logits.first(n));
    } else {
      ctx.stage.write_output(x, n_embd, logits);
    }
    return;
  }
  const bool all_hidden = !ctx.all_hidden.empty();
  if (all_hidden) {
    // Every row's final-normed state (what an MTP drafter reads), normed
    // row by row, delivered to the caller's memory.
    const size_t n = rows.size() * n_embd;
    const Tensor every = backend.output_tensor(ctx.all_hidden.first(n), buf.all_hidden);
    norm.apply(ctx, x.first(n), every);
    backend.copy_to_host(every, ctx.all_hidden.first(n));
  }
  size_t n_out = 0;
  for (const auto& row : rows) n_out += row.logits ? 1 : 0;
  if (n_out == 0) return;
  const bool hidden = ctx.output == RowOutput::hidden;
  const Tensor normed = hidden ? backend.output_tensor(logits.first(n_out * n_embd), buf.normed)
                               : backend.scratch(buf.normed, n_out * n_embd);
  size_t k = 0;
  for (size_t r = 0; r < rows.size(); ++r) {
    if (!rows[r].logits) continue;
    const auto out = normed.subspan(k++ * n_embd, n_embd);
    if (all_hidden) {
      backend.copy_from_host(ctx.all_hidden.subspan(r * n_embd, n_embd), out);
    } else {
      norm.apply(ctx, x.subspan(r * n_embd, n_embd), out);
    }
  }
  if (hidden) {
    backend.copy_to_host(normed, logits.first(n_out * n_embd));
    return;
  }
  const auto host_out = logits.first(n_out * static_cast<size_t>(hp.n_vocab));
  const Tensor out = backend.output_tensor(host_out, buf.logits);
  backend.matmul(output, normed, static_cast<int64_t>(n_out), out, hp.n_vocab);
  backend.add_bias_rows(out, bias);
  // Granite's ggml_scale of the logits.
  if (hp.logit_scale != 0.0f) backend.scale(out, hp.logit_scale);
  if (hp.final_softcap != 0.0f) backend.softcap(out, hp.final_softcap);
  backend.copy_to_host(out, host_out);
}

}  // namespace cortiq
