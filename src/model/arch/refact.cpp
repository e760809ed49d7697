// Small Magic's Refact (`refact`, Refact-1.6B): Llama's pre-norm decoder
// (RMS norms, SwiGLU, MQA) with ALiBi instead of RoPE:
//
//   x = token_embd[token]
//   for each layer:
//     x += attention(rms_norm(x) * attn_norm)   Q/K/V biases (optional),
//                                               scores + ALiBi (max bias 8)
//     x += down(silu(gate(h)) * up(h)),  h = rms_norm(x) * ffn_norm
//   logits = output(rms_norm(x) * output_norm)  output = token_embd if absent
//
// llama.cpp loads Refact with Llama's tensor list but its graph applies
// neither the attention output bias nor the FFN biases, nor rope_freqs (no
// RoPE), nor any FFN scale: those are read without effect. It fixes the
// ALiBi max bias at 8 (no key), scales the scores by 1/sqrt(head size)
// whatever attention.scale says and needs keys and values of one head size.
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

struct RefactLayer {
  Norm attn_norm;
  AttentionWeights attn;
  Norm ffn_norm;
  FfnWeights ffn;
};

struct RefactWeights {
  TokenEmbedding embedding;
  OutputHead head;
  RopeTables rope;  // unused: no layer rotates
  std::vector<RefactLayer> layers;

  void visit(TensorVisitor& v, const ModelHParams& hp) {
    embedding.visit(v, hp);
    head.visit(v, hp, embedding);
    for (int64_t il = 0; il < hp.n_layer; ++il) {
      RefactLayer& layer = layers.emplace_back();
      const auto name = [&](std::string_view what) { return layer_tensor_name(il, what); };
      layer.attn_norm.visit(v, name("attn_norm"), hp.n_embd, NormKind::rms, hp.rms_eps);
      layer.attn.visit(v, hp, il, {});
      v.without_effect(name("attn_output.bias"), hp.n_embd, TensorKind::bias);
      layer.ffn_norm.visit(v, name("ffn_norm"), hp.n_embd, NormKind::rms, hp.rms_eps);
      // llama.cpp reads rope_freqs with the first layer's tensors.
      if (il == 0) v.without_effect("rope_freqs.weight", hp.rope.n_dims / 2, TensorKind::norm);
      layer.ffn.visit(v, hp, il, {.scales_applied = false});
      const int64_t n_ff = hp.layer(il).n_ff;
      v.without_effect(name("ffn_gate.bias"), n_ff, TensorKind::bias);
      v.without_effect(name("ffn_down.bias"), hp.n_embd, TensorKind::bias);
      v.without_effect(name("ffn_up.bias"), n_ff, TensorKind::bias);
    }
  }
};

class RefactModel final : public FamilyModel<RefactWeights> {
 public:
  using FamilyModel::FamilyModel;

 private:
  void run_layers(std::span<const BatchRow> rows, std::span<const int32_t> cells, KvCache& cache,
                  ForwardContext& ctx, std::span<float> logits) const override {
    const auto& h = hparams_;
    const auto n = rows.size();
    const auto [x, normed, branch, pass] = start_layers(h, rows, cells, ctx, w_.embedding, w_.rope);
    for (const int64_t il : ctx.stage.layers()) {
      const RefactLayer& layer = w_.layers[static_cast<size_t>(il)];
      layer.attn_norm.apply(ctx, x, normed);
      attention(layer.attn, h, il, pass, cache, ctx, normed, branch);
      ctx.backend.add(x, branch);
      layer.ffn_norm.apply(ctx, x, normed);
      ffn(layer.ffn, FfnActivation::swiglu, h, il, static_cast<int64_t>(n), ctx, normed, branch);
      ctx.backend.add(x, branch);
    }
    w_.head.apply(h, rows, x, ctx, logits);
  }
};

void read_refact(const HParamReader& keys, ModelHParams& hp) {
  // llama.cpp's get_key: no default.
  keys.require("attention.layer_norm_rms_epsilon");
  if (hp.head_dim_v != hp.head_dim_k) keys.invalid("refact needs key_length = value_length");
  hp.attention_scale = 0.0f;
  hp.alibi_max_bias = 8.0f;
  for (LayerSpec& layer : hp.layers) layer.rope = RopeSlot::none;
}

}  // namespace

const Family kRefactFamily{.arch = "refact",
                           .make = make_model<RefactModel>,
                           .read_hparams = read_refact,
                           .tensors = tensors_of<RefactWeights>};

}  // namespace cortiq
