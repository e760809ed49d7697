// NVIDIA's Nemotron-4 / Minitron (`nemotron`): a pre-norm decoder with layer
// norms (weight and bias; the converter stores HF's 1 + w), NeoX RoPE over
// part of each head (half on Nemotron-4-Minitron), optional biases and an
// ungated feed-forward with the squared ReLU:
//
//   x = token_embd[token]
//   for each layer:
//     x += attention(layer_norm(x) * attn_norm + attn_norm_b)
//                            Q/K/V biases and output bias optional
//     x += down(relu(up(h) + up_b)^2) + down_b,
//          h = layer_norm(x) * ffn_norm + ffn_norm_b      (FFN biases optional)
//   logits = output(layer_norm(x) * output_norm + output_norm_b)
//
// llama.cpp scales the scores by 1/sqrt(head size) whatever attention.scale
// says and applies no FFN scales; it shapes the attention output [n_embd,
// n_embd]. It runs Inception's Jais-2 on the same graph (jais2.cpp, through
// nemotron.hpp): every bias required (Q/K/V always separate), the output
// matrix optional (tied), the whole head rotated.
#include <memory>

#include "formats/gguf/gguf_file.hpp"
#include "kernels/cpu/activations.hpp"
#include "model/arch/arch.hpp"
#include "model/arch/family_support.hpp"
#include "model/arch/nemotron.hpp"
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

struct NemotronLayer {
  Norm attn_norm;
  AttentionWeights attn;
  Norm ffn_norm;
  FfnWeights ffn;
};

struct NemotronWeights {
  TokenEmbedding embedding;
  OutputHead head;
  RopeTables rope;
  std::vector<NemotronLayer> layers;

  void visit(TensorVisitor& v, const ModelHParams& hp) {
    const bool jais2 = hp.arch == "jais2";
    embedding.visit(v, hp);
    head.visit(v, hp, embedding, jais2 ? OutputMatrix::own_or_tied : OutputMatrix::own,
               OutputBias::none, NormKind::layer);
    for (int64_t il = 0; il < hp.n_layer; ++il) {
      NemotronLayer& layer = layers.emplace_back();
      layer.attn_norm.visit(v, layer_tensor_name(il, "attn_norm"), hp.n_embd, NormKind::layer,
                            hp.norm_eps);
      if (jais2) {
        layer.attn.visit(
            v, hp, il,
            {.qkv = QkvForm::separate_with_biases, .output_bias = AttnOutputBias::required});
      } else {
        layer.attn.visit(v, hp, il, {.output_bias = AttnOutputBias::optional});
      }
      layer.ffn_norm.visit(v, layer_tensor_name(il, "ffn_norm"), hp.n_embd, NormKind::layer,
                           hp.norm_eps);
      layer.ffn.visit(
          v, hp, il,
          {.gated = false, .biases = true, .biases_required = jais2, .scales_applied = false});
    }
  }
};

class NemotronModel final : public FamilyModel<NemotronWeights> {
 public:
  using FamilyModel::FamilyModel;

 private:
  void run_layers(std::span<const BatchRow> rows, std::span<const int32_t> cells, KvCache& cache,
                  ForwardContext& ctx, std::span<float> logits) const override {
    const auto& h = hparams_;
    const auto n = static_cast<int64_t>(rows.size());
    const auto [x, normed, branch, pass] = start_layers(h, rows, cells, ctx, w_.embedding, w_.rope);
    for (const int64_t il : ctx.stage.layers()) {
      const NemotronLayer& layer = w_.layers[static_cast<size_t>(il)];
      layer.attn_norm.apply(ctx, x, normed);
      attention(layer.attn, h, il, pass, cache, ctx, normed, branch);
      ctx.backend.add(x, branch);
      layer.ffn_norm.apply(ctx, x, normed);
      ffn(layer.ffn, FfnActivation::relu_sqr, h, il, n, ctx, normed, branch);
      ctx.backend.add(x, branch);
    }
    w_.head.apply(h, rows, x, ctx, logits);
  }
};

// The converter's keys: the layer norm epsilon and half of each head rotated
// (Nemotron-4-Minitron's partial_rotary_factor 0.5).
void write_nemotron(const ModelGeometry& g, std::vector<gguf::KeyValue>& keys) {
  const std::string p = "nemotron.";
  keys.push_back({p + "attention.layer_norm_epsilon", gguf::Value(static_cast<float>(g.rms_eps))});
  int64_t rot = (g.resolved_head_dim() / 2) & ~int64_t{1};
  if (rot == 0) rot = g.resolved_head_dim();
  for (gguf::KeyValue& kv : keys) {
    if (kv.key == p + "rope.dimension_count") kv.value = u32_value(rot);
  }
}

}  // namespace

namespace nemotron_graph {

void read_common(const HParamReader& keys, ModelHParams& hp) {
  // Required, as in llama.cpp.
  if (!keys.has("attention.layer_norm_epsilon")) {
    keys.invalid("missing key " + keys.key("attention.layer_norm_epsilon"));
  }
  hp.norm_eps = keys.float_or("attention.layer_norm_epsilon", 0.0f);
  hp.uses_rms_norm = false;
  if (!(hp.norm_eps > 0.0f)) keys.invalid("attention.layer_norm_epsilon must be positive");
  if (hp.head_dim_k != hp.head_dim_v) keys.invalid("key and value heads must be as wide");
  hp.attention_scale = 0.0f;
}

std::unique_ptr<DecoderModel> make(ModelHParams hparams, WeightBinder& binder) {
  return make_model<NemotronModel>(std::move(hparams), binder);
}

std::vector<TensorSpec> tensors(const ModelHParams& hparams) {
  return tensors_of<NemotronWeights>(hparams);
}

}  // namespace nemotron_graph

const Family kNemotronFamily{.arch = "nemotron",
                             .neox_rope = true,
                             .make = nemotron_graph::make,
                             .read_hparams = nemotron_graph::read_common,
                             .tensors = nemotron_graph::tensors,
                             .write_hparams = write_nemotron,
                             .fixed_head_dim = true};

}  // namespace cortiq
