// What the family files share beyond the blocks: the factory, the model
// frame and the tensor list of a family's Weights struct (Family::make,
// FamilyModel, Family::tensors), and
// the start of every forward pass (the embedded rows, the scratch rows a
// layer's norms and branches write, and what every layer's attention shares).
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "kernels/cpu/norm.hpp"
#include "model/blocks/attention.hpp"
#include "model/blocks/embedding.hpp"
#include "model/decoder_model.hpp"
#include "model/hparams.hpp"
#include "model/rope_setup.hpp"
#include "model/tensor_table.hpp"
#include "model/weights.hpp"

namespace cortiq {

// Family::make for a DecoderModel subclass constructed from (hparams, binder).
template <class Model>
std::unique_ptr<DecoderModel> make_model(ModelHParams hparams, WeightBinder& binder) {
  return std::make_unique<Model>(std::move(hparams), binder);
}

// A family's model: its Weights bound (Weights::visit, which lists every
// tensor the family reads) and its RoPE tables set up at construction; the
// family writes run_layers.
template <class Weights>
class FamilyModel : public DecoderModel {
 public:
  FamilyModel(ModelHParams hparams, WeightBinder& binder)
      : DecoderModel(std::move(hparams), binder) {
    w_.visit(binder, hparams_);
    w_.rope.setup(hparams_);
  }

 protected:
  Weights w_;
};

// Family::tensors: the tensors a Weights struct visits, for gen-model.
template <class Weights>
std::vector<TensorSpec> tensors_of(const ModelHParams& hparams) {
  TensorSpecCollector collector;
  Weights weights;
  weights.visit(collector, hparams);
  return collector.take();
}

// The residual stream of a forward pass and its scratch rows, all
// [rows][n_embd]: x holds the embedded tokens (or, for a stage that starts
// from hidden states, those states), normed and branch are for a layer's
// norm output and branch output.
struct LayerStream {
  Tensor x, normed, branch;
  AttentionPass pass;
};

// The stream entering the stage's first layer: the embedded tokens, normed
// by `embedding_norm` where the family has one (BERT, GPT-2's optional one,
// RWKV), or the stage's input, which already went through both.
inline LayerStream start_layers(const ModelHParams& hp, std::span<const BatchRow> rows,
                                std::span<const int32_t> cells, ForwardContext& ctx,
                                const TokenEmbedding& embedding, const RopeTables& rope,
                                const Norm* embedding_norm = nullptr) {
  auto& buf = ctx.buffers;
  const size_t width = rows.size() * static_cast<size_t>(hp.n_embd);
  LayerStream s{ctx.backend.scratch(buf.residual, width), ctx.backend.scratch(buf.normed, width),
                ctx.backend.scratch(buf.proj, width),
                AttentionPass{rows, cells, rope.for_rows(rows, buf)}};
  if (ctx.stage.from_tokens()) {
    embedding.embed(hp, rows, s.x, ctx);
    if (embedding_norm && !embedding_norm->weight.empty()) embedding_norm->apply(ctx, s.x, s.x);
  } else {
    const size_t n = rows.size() * static_cast<size_t>(hp.n_embd);
    if (ctx.stage.width == hp.n_embd) {
      ctx.backend.copy_from_host(ctx.stage.input.first(n), s.x.first(n));
    } else {
      ctx.stage.read_input(s.x, static_cast<size_t>(hp.n_embd));
    }
  }
  return s;
}

// out = rms_norm(x) * weight, row by row (n_embd wide).
inline void rms_norm(ForwardContext& ctx, const ModelHParams& hp, ConstTensor x,
                     std::span<const float> weight, Tensor out) {
  ctx.backend.rms_norm_rows(x, weight, hp.rms_eps, out, static_cast<size_t>(hp.n_embd));
}

// What many of llama.cpp's graphs assume without checking: every head is
// rotated in full and keys and values are as wide. A file that says
// otherwise is refused by name rather than run with the wrong shapes.
inline void require_whole_rotation(const HParamReader& keys, const ModelHParams& hp) {
  if (hp.rope.n_dims != hp.head_dim_k || hp.head_dim_v != hp.head_dim_k) {
    keys.invalid(hp.arch + " needs rope.dimension_count = key_length = value_length");
  }
}

// What llama.cpp requires of arcee, ernie4_5, apertus, maincoder and other
// files: the norm epsilon given, key and value heads of one size, rotated
// in full; their scores are scaled by 1/sqrt(head_dim).
inline void read_whole_rotation_hparams(const HParamReader& keys, ModelHParams& hp) {
  keys.require("attention.layer_norm_rms_epsilon");
  require_whole_rotation(keys, hp);
  hp.attention_scale = 0.0f;
}

}  // namespace cortiq
