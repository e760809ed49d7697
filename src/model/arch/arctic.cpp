// Snowflake Arctic (`arctic`): each layer runs a small dense FFN on the
// attention's residual and, in parallel, a mixture of experts on the
// layer's input ("residual MoE"):
//
//   x = token_embd[token]
//   for each layer:
//     r  = x + attention(rms_norm(x) * attn_norm)       RoPE on adjacent pairs
//     x  = r + ffn(rms_norm(r) * ffn_norm)              SwiGLU, n_embd wide
//            + moe(rms_norm(x_in) * ffn_norm_exps)      x_in: the layer's input
//   logits = output(rms_norm(x) * output_norm)          output = token_embd if absent
//
// The router: softmax, the chosen experts (n_ff wide) renormalized. Scores
// are scaled by 1/sqrt(head size); llama.cpp shapes Q and attn_output by
// n_embd (heads tile it) and applies no FFN or expert scales.
#include <algorithm>
#include <memory>

#include "model/arch/arch.hpp"
#include "model/arch/family_support.hpp"
#include "model/blocks/attention.hpp"
#include "model/blocks/embedding.hpp"
#include "model/blocks/ffn.hpp"
#include "model/blocks/moe.hpp"
#include "model/decoder_model.hpp"
#include "model/gen_model/arch_spec.hpp"
#include "model/rope_setup.hpp"
#include "model/weights.hpp"

namespace cortiq {

namespace {

struct ArcticLayer {
  std::vector<float> attn_norm;
  AttentionWeights attn;
  std::vector<float> ffn_norm;
  FfnWeights ffn;  // the dense residual FFN
  std::vector<float> moe_norm;
  MoeWeights moe;
};

struct ArcticWeights {
  TokenEmbedding embedding;
  OutputHead head;
  RopeTables rope;
  std::vector<ArcticLayer> layers;

  void visit(TensorVisitor& v, const ModelHParams& hp) {
    embedding.visit(v, hp);
    head.visit(v, hp, embedding, OutputMatrix::own_or_tied);
    const auto norm = [&](std::vector<float>& w, int64_t il, std::string_view name) {
      v.vector(w, layer_tensor_name(il, name), hp.n_embd, TensorKind::norm);
    };
    for (int64_t il = 0; il < hp.n_layer; ++il) {
      ArcticLayer& layer = layers.emplace_back();
      norm(layer.attn_norm, il, "attn_norm.weight");
      layer.attn.visit(v, hp, il, {});
      norm(layer.ffn_norm, il, "ffn_norm.weight");
      layer.ffn.visit(v, hp, il, {.scales_applied = false, .width = hp.n_embd});
      layer.moe.visit(v, hp, il, {});
      norm(layer.moe_norm, il, "ffn_norm_exps.weight");
    }
  }
};

class ArcticModel final : public FamilyModel<ArcticWeights> {
 public:
  using FamilyModel::FamilyModel;

 private:
  void run_layers(std::span<const BatchRow> rows, std::span<const int32_t> cells, KvCache& cache,
                  ForwardContext& ctx, std::span<float> logits) const override {
    const auto& h = hparams_;
    const auto n = static_cast<int64_t>(rows.size());
    const auto [x, normed, branch, pass] = start_layers(h, rows, cells, ctx, w_.embedding, w_.rope);
    const Tensor moe_in = ctx.backend.scratch(ctx.buffers.parallel, x.size());
    for (const int64_t il : ctx.stage.layers()) {
      const ArcticLayer& layer = w_.layers[static_cast<size_t>(il)];
      rms_norm(ctx, h, x, layer.moe_norm, moe_in);  // from the layer's input
      rms_norm(ctx, h, x, layer.attn_norm, normed);
      attention(layer.attn, h, il, pass, cache, ctx, normed, branch);
      ctx.backend.add(x, branch);
      rms_norm(ctx, h, x, layer.ffn_norm, normed);
      ffn(layer.ffn, FfnActivation::swiglu, h, il, n, ctx, normed, branch);
      ctx.backend.add(x, branch);
      moe_ffn(layer.moe, h, il, n, ctx, moe_in, branch);
      ctx.backend.add(x, branch);
    }
    w_.head.apply(h, rows, x, ctx, logits);
  }
};

void read_arctic(const HParamReader& keys, ModelHParams& hp) {
  keys.require("attention.layer_norm_rms_epsilon");
  if (hp.head_dim_k != hp.head_dim_v) keys.invalid("key and value heads must be as wide");
  hp.attention_scale = 0.0f;
  read_expert_hparams(keys, hp, /*width_key=*/false, /*shared_expert=*/false);
  hp.router.normalize = true;
}

// Arctic's routing in small: four experts, two per token.
void write_arctic(const ModelGeometry& g, std::vector<gguf::KeyValue>& keys) {
  write_expert_counts(g, "arctic", keys);
}

}  // namespace

// llama.cpp shapes attn_q and attn_output [n_embd, n_embd]: heads must tile n_embd.
const Family kArcticFamily{.arch = "arctic",
                           .neox_rope = false,
                           .make = make_model<ArcticModel>,
                           .read_hparams = read_arctic,
                           .tensors = tensors_of<ArcticWeights>,
                           .write_hparams = write_arctic,
                           .fixed_head_dim = true};

}  // namespace cortiq
