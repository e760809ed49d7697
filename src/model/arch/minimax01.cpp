// MiniMax's MiniMax-01 (`minimax-01`: MiniMax-Text-01, 456B-A46B): seven
// layers in eight are lightning attention (blocks/lightning_attention.hpp),
// the eighth softmax attention, each followed by a mixture of experts; the
// residual is the normed input, scaled (the model's DeepNorm-style alpha):
//
//   x = token_embd[token]
//   for each layer:
//     h  = rms_norm(x) * attn_norm
//     x  = (recurrent ? lightning_attention(h)
//                     : attention(h))   NeoX RoPE over rope.dimension_count,
//                                       scores by 1/sqrt(head size)
//          + residual_scale * h
//     h  = rms_norm(x) * ffn_norm
//     x  = moe(h) + residual_scale * h   softmax routing, renormalized,
//                                        experts n_ff wide
//   logits = output(rms_norm(x) * output_norm)    output = token_embd if absent
//
// A layer is recurrent as attention.recurrent_layers says, or else unless
// (layer + 1) is a multiple of full_attention_interval (default 8).
#include <memory>

#include "formats/gguf/gguf_file.hpp"
#include "kernels/cpu/activations.hpp"
#include "model/arch/arch.hpp"
#include "model/arch/family_support.hpp"
#include "model/arch/recurrent_layers.hpp"
#include "model/blocks/attention.hpp"
#include "model/blocks/embedding.hpp"
#include "model/blocks/lightning_attention.hpp"
#include "model/blocks/moe.hpp"
#include "model/decoder_model.hpp"
#include "model/gen_model/arch_spec.hpp"
#include "model/rope_setup.hpp"
#include "model/tensor_table.hpp"
#include "model/weights.hpp"

namespace cortiq {

namespace {

struct Minimax01Layer {
  std::vector<float> attn_norm, ffn_norm;
  LightningAttentionWeights lightning;  // recurrent layers
  AttentionWeights attn;                // the others
  MoeWeights moe;

  void visit(TensorVisitor& v, const ModelHParams& hp, int64_t il) {
    v.vector(attn_norm, layer_tensor_name(il, "attn_norm.weight"), hp.n_embd, TensorKind::norm);
    if (hp.layer(il).is_recurrent()) {
      lightning.visit(v, hp, il);
    } else {
      attn.visit(v, hp, il, {});
    }
    v.vector(ffn_norm, layer_tensor_name(il, "ffn_norm.weight"), hp.n_embd, TensorKind::norm);
    moe.visit(v, hp, il, {.gate_optional = true});
  }
};

struct Minimax01Weights {
  TokenEmbedding embedding;
  OutputHead head;
  RopeTables rope;
  std::vector<Minimax01Layer> layers;

  // As llama.cpp's minimax-01 loader.
  void visit(TensorVisitor& v, const ModelHParams& hp) {
    embedding.visit(v, hp);
    head.visit(v, hp, embedding, OutputMatrix::own_or_tied);
    for (int64_t il = 0; il < hp.n_layer; ++il) layers.emplace_back().visit(v, hp, il);
  }
};

class Minimax01Model final : public FamilyModel<Minimax01Weights> {
 public:
  using FamilyModel::FamilyModel;

 private:
  void run_layers(std::span<const BatchRow> rows, std::span<const int32_t> cells, KvCache& cache,
                  ForwardContext& ctx, std::span<float> logits) const override {
    const auto& h = hparams_;
    const auto n = static_cast<int64_t>(rows.size());
    const LayerStream s = start_layers(h, rows, cells, ctx, w_.embedding, w_.rope);
    // x = branch + residual_scale * h: llama.cpp's ggml_scale of the normed
    // input, then the add.
    const auto add_scaled_residual = [&] {
      ctx.backend.scale(s.normed, h.residual_scale);
      const std::span<float> x = s.x, branch = s.branch, normed = s.normed;
      for (size_t i = 0; i < x.size(); ++i) x[i] = branch[i] + normed[i];
    };
    for (const int64_t il : ctx.stage.layers()) {
      const Minimax01Layer& layer = w_.layers[static_cast<size_t>(il)];
      rms_norm(ctx, h, s.x, layer.attn_norm, s.normed);
      if (h.layer(il).is_recurrent()) {
        lightning_attention(layer.lightning, h, il, rows, cache, ctx, s.normed, s.branch);
      } else {
        attention(layer.attn, h, il, s.pass, cache, ctx, s.normed, s.branch);
      }
      add_scaled_residual();
      rms_norm(ctx, h, s.x, layer.ffn_norm, s.normed);
      moe_ffn(layer.moe, h, il, n, ctx, s.normed, s.branch);
      add_scaled_residual();
    }
    w_.head.apply(h, rows, s.x, ctx, logits);
  }
};

void read_minimax01(const HParamReader& keys, ModelHParams& hp) {
  keys.require("attention.layer_norm_rms_epsilon");
  keys.require("residual_scale");
  hp.residual_scale = keys.float_or("residual_scale", 0.0f);
  hp.attention_scale = 0.0f;
  if (hp.head_dim_k != hp.head_dim_v) keys.invalid("key and value heads must be as wide");
  // Each lightning layer's decay scale divides by block_count - 1.
  if (hp.n_layer < 2) keys.invalid("minimax-01 needs at least two layers");
  const std::vector<bool> recurrent =
      recurrent_layers(keys, hp.n_layer, hp.n_layer, /*default_interval=*/8);
  for (int64_t il = 0; il < hp.n_layer; ++il) {
    if (!recurrent[static_cast<size_t>(il)]) continue;
    LayerSpec& layer = hp.layers[static_cast<size_t>(il)];
    layer.n_head = 0;
    layer.n_head_kv = 0;
    layer.rope = RopeSlot::none;
    layer.state_width = lightning_attention_state_width(hp);
    layer.recurrent = RecurrentKind::lightning_attention;
  }
  if (keys.uint_or("expert_count", 0) == 0) keys.invalid("minimax-01 needs experts");
  read_expert_hparams(keys, hp, /*width_key=*/false, /*shared_expert=*/false);
  hp.router.gating = RouterGating::softmax;
  hp.router.normalize = true;
}

// MiniMax-Text-01's shape in small: half of each head rotated, every third
// layer (and the last) softmax attention, four experts (two per token)
// n_ff wide, its residual scale (sqrt(2 n_layer) for its 80 layers).
void write_minimax01(const ModelGeometry& g, std::vector<gguf::KeyValue>& keys) {
  write_expert_counts(g, "minimax-01", keys);
  write_half_rotary(g, "minimax-01", keys);
  keys.push_back({"minimax-01.residual_scale", gguf::Value(3.5565588f)});
  write_u32_per_layer(
      "minimax-01.attention.recurrent_layers", g.n_layer,
      [&](int64_t il) { return attends_in_small(g, il) ? 0 : 1; }, keys);
}

}  // namespace

const Family kMinimax01Family{.arch = "minimax-01",
                              .neox_rope = true,
                              .make = make_model<Minimax01Model>,
                              .read_hparams = read_minimax01,
                              .tensors = tensors_of<Minimax01Weights>,
                              .write_hparams = write_minimax01};

}  // namespace cortiq
