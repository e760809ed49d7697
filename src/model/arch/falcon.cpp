// TII's Falcon 7B / 40B (`falcon`): attention and an ungated GELU
// feed-forward in parallel from the same layer input, layer norms, one fused
// Q/K/V projection, NeoX RoPE over the whole head, no biases:
//
//   x = token_embd[token]
//   for each layer:
//     h = layer_norm(x) * attn_norm + attn_norm_b
//     a = h, or layer_norm(x) * attn_norm_2 + attn_norm_2_b when the file
//         has attn_norm_2 (Falcon 40B's second input norm)
//     x = (down(gelu(up(h))) + attention(a)) + x
//   logits = output(layer_norm(x) * output_norm + output_norm_b)
//            output = token_embd if absent
//
// llama.cpp shapes the attention output [n_embd, n_embd] (heads tile
// n_embd), needs attn_qkv (Q/K/V apart are not read), scales the scores by
// 1/sqrt(head size) whatever attention.scale says, applies no FFN scale
// (build_ffn gets NULL for them) and asserts that RoPE turns the whole head.
#include <memory>

#include "formats/gguf/gguf_file.hpp"
#include "kernels/cpu/activations.hpp"
#include "model/arch/arch.hpp"
#include "model/arch/family_support.hpp"
#include "model/blocks/attention.hpp"
#include "model/blocks/embedding.hpp"
#include "model/blocks/ffn.hpp"
#include "model/blocks/norm.hpp"
#include "model/decoder_model.hpp"
#include "model/gen_model/arch_spec.hpp"
#include "model/rope_setup.hpp"
#include "model/weights.hpp"

namespace cortiq {

namespace {

struct FalconLayer {
  Norm attn_norm;
  Norm attn_norm_2;  // weight empty when the file has none
  AttentionWeights attn;
  FfnWeights ffn;
};

struct FalconWeights {
  TokenEmbedding embedding;
  OutputHead head;
  RopeTables rope;
  std::vector<FalconLayer> layers;

  void visit(TensorVisitor& v, const ModelHParams& hp) {
    embedding.visit(v, hp);
    head.visit(v, hp, embedding, OutputMatrix::own_or_tied, OutputBias::none, NormKind::layer);
    for (int64_t il = 0; il < hp.n_layer; ++il) {
      FalconLayer& layer = layers.emplace_back();
      const auto name = [&](std::string_view what) { return layer_tensor_name(il, what); };
      layer.attn_norm.visit(v, name("attn_norm"), hp.n_embd, NormKind::layer, hp.norm_eps);
      // Weight and bias optional each; the graph uses the norm when the weight is there.
      Norm& norm2 = layer.attn_norm_2;
      norm2.kind = NormKind::layer;
      norm2.eps = hp.norm_eps;
      v.vector(norm2.weight, name("attn_norm_2.weight"), hp.n_embd, TensorKind::norm, false);
      v.vector(norm2.bias, name("attn_norm_2.bias"), hp.n_embd, TensorKind::bias, false);
      layer.attn.visit(
          v, hp, il,
          {.qkv = QkvForm::fused, .fused_qkv_bias = FusedQkvBias::none, .fused_qkv_written = true});
      layer.ffn.visit(v, hp, il, {.gated = false, .scales_applied = false});
    }
  }
};

class FalconModel final : public FamilyModel<FalconWeights> {
 public:
  using FamilyModel::FamilyModel;

 private:
  void run_layers(std::span<const BatchRow> rows, std::span<const int32_t> cells, KvCache& cache,
                  ForwardContext& ctx, std::span<float> logits) const override {
    const auto& h = hparams_;
    const auto n = rows.size();
    const auto [x, normed, branch, pass] = start_layers(h, rows, cells, ctx, w_.embedding, w_.rope);
    for (const int64_t il : ctx.stage.layers()) {
      const FalconLayer& layer = w_.layers[static_cast<size_t>(il)];
      const bool two_norms = !layer.attn_norm_2.weight.empty();
      (two_norms ? layer.attn_norm_2 : layer.attn_norm).apply(ctx, x, normed);
      attention(layer.attn, h, il, pass, cache, ctx, normed, branch);
      if (two_norms) layer.attn_norm.apply(ctx, x, normed);
      // The attention's scratch (attn_out, [rows][n_embd] here) is free
      // again: it takes the FFN's output while `branch` keeps the attention's.
      const Tensor ffn_out =
          ctx.backend.scratch(ctx.buffers.attn_out, n * static_cast<size_t>(h.n_embd));
      ffn(layer.ffn, FfnActivation::gelu, h, il, static_cast<int64_t>(n), ctx, normed, ffn_out);
      // llama.cpp's order: (ffn + attention) + x.
      ctx.backend.add(ffn_out, branch);
      ctx.backend.add(x, ffn_out);
    }
    w_.head.apply(h, rows, x, ctx, logits);
  }
};

void read_falcon(const HParamReader& keys, ModelHParams& hp) {
  // Required, as in llama.cpp.
  if (!keys.has("attention.layer_norm_epsilon")) {
    keys.invalid("missing key " + keys.key("attention.layer_norm_epsilon"));
  }
  hp.norm_eps = keys.float_or("attention.layer_norm_epsilon", 0.0f);
  hp.uses_rms_norm = false;
  if (!(hp.norm_eps > 0.0f)) keys.invalid("attention.layer_norm_epsilon must be positive");
  if (hp.rope.n_dims != hp.head_dim_k || hp.head_dim_v != hp.head_dim_k) {
    keys.invalid("falcon needs rope.dimension_count = key_length = value_length");
  }
  hp.attention_scale = 0.0f;
}

void write_falcon(const ModelGeometry& g, std::vector<gguf::KeyValue>& keys) {
  keys.push_back(
      {"falcon.attention.layer_norm_epsilon", gguf::Value(static_cast<float>(g.rms_eps))});
}

}  // namespace

const Family kFalconFamily{.arch = "falcon",
                           .neox_rope = true,
                           .make = make_model<FalconModel>,
                           .read_hparams = read_falcon,
                           .tensors = tensors_of<FalconWeights>,
                           .write_hparams = write_falcon,
                           .fixed_head_dim = true};

}  // namespace cortiq
