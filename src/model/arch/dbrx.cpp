// Databricks' DBRX (`dbrx`): a pre-norm decoder with layer norms (weights,
// no biases), one fused Q/K/V projection clamped to ±clamp_kqv, and a
// mixture of experts in every layer:
//
//   x = token_embd[token]
//   for each layer:
//     x += attention(layer_norm(x) * attn_norm)          NeoX RoPE
//            [q | k | v] = clamp(attn_qkv(h), -clamp_kqv, clamp_kqv)
//     x += moe(layer_norm(x) * attn_output_norm)         softmax router, SwiGLU experts
//   logits = output(layer_norm(x) * output_norm)
//
// As llama.cpp reads it: attention.layer_norm_epsilon and
// attention.clamp_kqv required; the chosen weights renormalized; the
// experts n_ff wide; the output matrix its own; scores scaled by
// 1/sqrt(head size). attn_output_norm is the FFN's pre-norm (the
// checkpoint's norm_2).
#include <memory>

#include "model/arch/arch.hpp"
#include "model/arch/family_support.hpp"
#include "model/blocks/attention.hpp"
#include "model/blocks/embedding.hpp"
#include "model/blocks/moe.hpp"
#include "model/blocks/norm.hpp"
#include "model/decoder_model.hpp"
#include "model/gen_model/arch_spec.hpp"
#include "model/rope_setup.hpp"
#include "model/weights.hpp"

namespace cortiq {

namespace {

struct DbrxLayer {
  Norm attn_norm;
  AttentionWeights attn;
  Norm ffn_norm;  // attn_output_norm
  MoeWeights moe;
};

struct DbrxWeights {
  TokenEmbedding embedding;
  OutputHead head;
  RopeTables rope;
  std::vector<DbrxLayer> layers;

  void visit(TensorVisitor& v, const ModelHParams& hp) {
    embedding.visit(v, hp);
    head.visit(v, hp, embedding, OutputMatrix::own, OutputBias::none, NormKind::layer_no_bias);
    for (int64_t il = 0; il < hp.n_layer; ++il) {
      DbrxLayer& layer = layers.emplace_back();
      layer.attn_norm.visit(v, layer_tensor_name(il, "attn_norm"), hp.n_embd,
                            NormKind::layer_no_bias, hp.norm_eps);
      layer.attn.visit(v, hp, il, {.qkv = QkvForm::fused, .fused_qkv_bias = FusedQkvBias::none});
      layer.ffn_norm.visit(v, layer_tensor_name(il, "attn_output_norm"), hp.n_embd,
                           NormKind::layer_no_bias, hp.norm_eps);
      layer.moe.visit(v, hp, il, {});
    }
  }
};

class DbrxModel final : public FamilyModel<DbrxWeights> {
 public:
  using FamilyModel::FamilyModel;

 private:
  void run_layers(std::span<const BatchRow> rows, std::span<const int32_t> cells, KvCache& cache,
                  ForwardContext& ctx, std::span<float> logits) const override {
    const auto& h = hparams_;
    const auto n = static_cast<int64_t>(rows.size());
    const auto [x, normed, branch, pass] = start_layers(h, rows, cells, ctx, w_.embedding, w_.rope);
    for (const int64_t il : ctx.stage.layers()) {
      const DbrxLayer& layer = w_.layers[static_cast<size_t>(il)];
      layer.attn_norm.apply(ctx, x, normed);
      attention(layer.attn, h, il, pass, cache, ctx, normed, branch);
      ctx.backend.add(x, branch);
      layer.ffn_norm.apply(ctx, x, normed);
      moe_ffn(layer.moe, h, il, n, ctx, normed, branch);
      ctx.backend.add(x, branch);
    }
    w_.head.apply(h, rows, x, ctx, logits);
  }
};

void read_dbrx(const HParamReader& keys, ModelHParams& hp) {
  hp.uses_rms_norm = false;
  keys.require("attention.layer_norm_epsilon");
  keys.require("attention.clamp_kqv");
  hp.norm_eps = keys.float_or("attention.layer_norm_epsilon", 0.0f);
  hp.clamp_kqv = keys.float_or("attention.clamp_kqv", 0.0f);
  if (hp.head_dim_k != hp.head_dim_v) keys.invalid("key and value heads must be as wide");
  hp.attention_scale = 0.0f;
  read_expert_hparams(keys, hp, /*width_key=*/false, /*shared_expert=*/false);
  hp.router.normalize = true;
}

// DBRX's shape in small: a clamp (DBRX's is 8; 2 cuts gen-model's random
// projections), four experts of which two per token.
void write_dbrx(const ModelGeometry& g, std::vector<gguf::KeyValue>& keys) {
  keys.push_back({"dbrx.attention.layer_norm_epsilon", gguf::Value(1e-5f)});
  keys.push_back({"dbrx.attention.clamp_kqv", gguf::Value(2.0f)});
  write_expert_counts(g, "dbrx", keys);
}

}  // namespace

// llama.cpp shapes attn_qkv [n_embd, n_embd + 2 * kv width] and attn_output
// [n_embd, n_embd]: heads must tile n_embd.
const Family kDbrxFamily{.arch = "dbrx",
                         .neox_rope = true,
                         .make = make_model<DbrxModel>,
                         .read_hparams = read_dbrx,
                         .tensors = tensors_of<DbrxWeights>,
                         .write_hparams = write_dbrx,
                         .fixed_head_dim = true};

}  // namespace cortiq
