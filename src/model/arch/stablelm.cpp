// Stability AI's StableLM (`stablelm`: StableLM-3B-4E1T, StableLM 2 1.6B /
// 12B, StableCode): a pre-norm decoder with layer norms, NeoX RoPE over part
// of each head (a quarter), optional Q/K/V biases and SwiGLU:
//
//   x = token_embd[token]
//   for each layer:
//     h = layer_norm(x) * attn_norm + attn_norm_b
//     x += attention(h)         StableLM 2 12B: q, k = per-head layer norms
//                               (attn_{q,k}_norm, one weight row per head) before RoPE
//     x += down(silu(gate(y)) * up(y)),
//          y = layer_norm(x) * ffn_norm + ffn_norm_b
//          or, in a layer without ffn_norm (12B: parallel residual), y = h
//   logits = output(layer_norm(x) * output_norm + output_norm_b)
//
// llama.cpp scales the scores by 1/sqrt(head size) whatever attention.scale
// says, shapes the attention output [n_embd, n_embd], reads no output bias
// on it, and applies no FFN scales.
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

struct StableLmLayer {
  Norm attn_norm;
  AttentionWeights attn;
  Norm ffn_norm;  // weight empty: parallel residual
  FfnWeights ffn;
};

struct StableLmWeights {
  TokenEmbedding embedding;
  OutputHead head;
  RopeTables rope;
  std::vector<StableLmLayer> layers;

  void visit(TensorVisitor& v, const ModelHParams& hp) {
    embedding.visit(v, hp);
    head.visit(v, hp, embedding, OutputMatrix::own, OutputBias::none, NormKind::layer);
    for (int64_t il = 0; il < hp.n_layer; ++il) {
      StableLmLayer& layer = layers.emplace_back();
      layer.attn_norm.visit(v, layer_tensor_name(il, "attn_norm"), hp.n_embd, NormKind::layer,
                            hp.norm_eps);
      layer.attn.visit(v, hp, il,
                       {.qk_norm = QkNorm::optional, .qk_norm_shape = QkNormShape::layer_per_head});
      // ffn_norm and its bias, each optional (llama.cpp's TENSOR_NOT_REQUIRED).
      layer.ffn_norm.kind = NormKind::layer;
      layer.ffn_norm.eps = hp.norm_eps;
      v.vector(layer.ffn_norm.weight, layer_tensor_name(il, "ffn_norm.weight"), hp.n_embd,
               TensorKind::norm, /*required=*/false);
      v.vector(layer.ffn_norm.bias, layer_tensor_name(il, "ffn_norm.bias"), hp.n_embd,
               TensorKind::bias, /*required=*/false);
      layer.ffn.visit(v, hp, il, {.scales_applied = false});
    }
  }
};

class StableLmModel final : public FamilyModel<StableLmWeights> {
 public:
  using FamilyModel::FamilyModel;

 private:
  void run_layers(std::span<const BatchRow> rows, std::span<const int32_t> cells, KvCache& cache,
                  ForwardContext& ctx, std::span<float> logits) const override {
    const auto& h = hparams_;
    const auto n = static_cast<int64_t>(rows.size());
    const auto [x, normed, branch, pass] = start_layers(h, rows, cells, ctx, w_.embedding, w_.rope);
    for (const int64_t il : ctx.stage.layers()) {
      const StableLmLayer& layer = w_.layers[static_cast<size_t>(il)];
      layer.attn_norm.apply(ctx, x, normed);
      attention(layer.attn, h, il, pass, cache, ctx, normed, branch);
      ctx.backend.add(x, branch);
      // Without ffn_norm the FFN reads the attention's normed input.
      if (!layer.ffn_norm.weight.empty()) layer.ffn_norm.apply(ctx, x, normed);
      ffn(layer.ffn, FfnActivation::swiglu, h, il, n, ctx, normed, branch);
      ctx.backend.add(x, branch);
    }
    w_.head.apply(h, rows, x, ctx, logits);
  }
};

void read_stablelm(const HParamReader& keys, ModelHParams& hp) {
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

// The converter's keys: the layer norm epsilon and a quarter of each head
// rotated (partial_rotary_factor 0.25).
void write_stablelm(const ModelGeometry& g, std::vector<gguf::KeyValue>& keys) {
  const std::string p = "stablelm.";
  keys.push_back({p + "attention.layer_norm_epsilon", gguf::Value(static_cast<float>(g.rms_eps))});
  int64_t rot = (g.resolved_head_dim() / 4) & ~int64_t{1};
  if (rot == 0) rot = g.resolved_head_dim();
  for (gguf::KeyValue& kv : keys) {
    if (kv.key == p + "rope.dimension_count") kv.value = u32_value(rot);
  }
}

// Q/K/V biases (StableLM 2 1.6B) and no ffn_norm: the parallel residual of
// the 12B, while --all-tensors writes the sequential layout with Q/K norms.
constexpr std::string_view kStableLmOptional[] = {"attn_q.bias", "attn_k.bias", "attn_v.bias"};

}  // namespace

const Family kStableLmFamily{.arch = "stablelm",
                             .neox_rope = true,
                             .make = make_model<StableLmModel>,
                             .read_hparams = read_stablelm,
                             .tensors = tensors_of<StableLmWeights>,
                             .write_hparams = write_stablelm,
                             .fixed_head_dim = true,
                             .converted_optional = kStableLmOptional};

}  // namespace cortiq
