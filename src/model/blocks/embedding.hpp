// The ends of a decoder: the token embedding (with the family's scale) and
// the output head (final norm, lm_head — the embedding again when tied —,
// final logit softcap). Shared by every family.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "kernels/cpu/weight_view.hpp"
#include "kv/batch.hpp"
#include "model/blocks/norm.hpp"
#include "model/forward_buffers.hpp"
#include "model/hparams.hpp"

namespace cortiq {

class TensorVisitor;

struct TokenEmbedding {
  kernels::WeightView table;  // token_embd.weight, [n_vocab][n_embd]
  // position_embd.weight, [n_ctx_train][n_embd]: learned absolute positions
  // (GPT-2, StarCoder, MPT's optional one); empty when the family has none.
  kernels::WeightView positions;
  // token_types.weight's first row (BERT: llama.cpp gives every token type
  // 0), added to every token; empty when the file has none.
  std::vector<float> type0;

  void visit(TensorVisitor& v, const ModelHParams& hp);
  // position_embd.weight, for the families with learned positions.
  void visit_positions(TensorVisitor& v, const ModelHParams& hp, bool required);
  // token_types.weight, [hp.n_token_types][n_embd], optional (BERT).
  void visit_token_types(TensorVisitor& v, const ModelHParams& hp);
  // x[r] = table[rows[r].token] * hp.embedding_scale (when set)
  //        + type0 (when the file has it) + positions[rows[r].pos] (when it has them).
  void embed(const ModelHParams& hp, std::span<const BatchRow> rows, Tensor x,
             ForwardContext& ctx) const;
};

// Whether a family's files may carry their own output.weight, or always
// reuse the token embedding (llama.cpp's Gemma and Gemma 2 read none), or
// must carry their own (OLMo2).
enum class OutputMatrix : uint8_t { own_or_tied, always_tied, own };
// Whether the family's lm_head may have a bias (output.bias: Qwen2), or
// always has one (Phi-2).
enum class OutputBias : uint8_t { none, optional, required };

struct OutputHead {
  Norm norm;                   // output_norm: RMS norm, or layer norm with a bias
  kernels::WeightView output;  // output.weight, or the token embedding when absent (tied)
  std::vector<float> bias;     // output.bias (optional, Qwen2)
  // The final norm's tensor (LFM2's converter names it token_embd_norm).
  std::string_view norm_name = "output_norm";

  // output_norm.weight (and .bias for a layer norm, optional when
  // !norm_bias_required: MPT), output.weight (optional: tied to
  // `embedding`), output.bias (optional) as the family says.
  void visit(TensorVisitor& v, const ModelHParams& hp, const TokenEmbedding& embedding,
             OutputMatrix matrix = OutputMatrix::own_or_tied, OutputBias bias = OutputBias::none,
             NormKind norm_kind = NormKind::rms, bool norm_bias_required = true);
  // Final norm and lm_head for the rows that want output (their normed
  // hidden states themselves when ctx.output is hidden), then the final
  // logit softcap. `logits` gets one row per marked row, in order; with
  // ctx.all_hidden, every row's normed hidden state goes there too. A stage
  // that ends before the last layer (ctx.stage) has no head: `logits` gets
  // every row's residual stream x, the next stage's input.
  void apply(const ModelHParams& hp, std::span<const BatchRow> rows, ConstTensor x,
             ForwardContext& ctx, std::span<float> logits) const;
};

// An encoder's output: the hidden rows (n_embd wide) of the rows marked
// `logits`, in order, as they are (no final norm); every row's, for the
// next stage, when the stage ends before the last layer.
// The rows come to the host through the backend (copy_to_host, one copy
// per run of consecutive wanted rows).
void copy_output_rows(const ModelHParams& hp, std::span<const BatchRow> rows, ConstTensor x,
                      ForwardContext& ctx, std::span<float> out);

}  // namespace cortiq
