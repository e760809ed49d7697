// AI2's OLMo 1 (`olmo`: OLMo-1B, OLMo-7B, OLMo-7B-0424): a pre-norm decoder
// whose layer norms have neither weight nor bias, optionally clamping its
// queries, keys and values, with RoPE on adjacent pairs and SwiGLU:
//
//   x = token_embd[token]
//   for each layer:
//     x += attention(layer_norm(x))      q, k, v = clamp(x W + b, -c, c)
//                                        c = attention.clamp_kqv (0: none)
//     x += down(silu(gate(h)) * up(h)),  h = layer_norm(x)
//   logits = output(layer_norm(x))       output.weight: the embedding if absent
//
//   layer_norm(x) = (x - mean(x)) / sqrt(var(x) + eps), nothing learned
//
// llama.cpp shapes attn_q and attn_output [n_embd, n_embd] (heads tile
// n_embd), scales the scores by 1/sqrt(head size) whatever attention.scale
// says, applies no FFN scales (build_ffn gets NULL for them), and asserts
// that RoPE turns the whole head. The Q/K/V biases are the optional ones
// llama.cpp's create_tensor_qkv reads for every family (OLMo has none).
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

struct OlmoLayer {
  Norm attn_norm;  // no tensors: plain layer norms
  AttentionWeights attn;
  Norm ffn_norm;
  FfnWeights ffn;
};

struct OlmoWeights {
  TokenEmbedding embedding;
  OutputHead head;
  RopeTables rope;
  std::vector<OlmoLayer> layers;

  // As llama.cpp's load_arch_tensors for olmo, plus its generic per-tensor
  // scales (which the attention and FFN blocks add).
  void visit(TensorVisitor& v, const ModelHParams& hp) {
    embedding.visit(v, hp);
    head.visit(v, hp, embedding, OutputMatrix::own_or_tied, OutputBias::none,
               NormKind::plain_layer);
    for (int64_t il = 0; il < hp.n_layer; ++il) {
      OlmoLayer& layer = layers.emplace_back();
      layer.attn_norm.visit(v, layer_tensor_name(il, "attn_norm"), hp.n_embd, NormKind::plain_layer,
                            hp.norm_eps);
      layer.attn.visit(v, hp, il, {});
      layer.ffn_norm.visit(v, layer_tensor_name(il, "ffn_norm"), hp.n_embd, NormKind::plain_layer,
                           hp.norm_eps);
      layer.ffn.visit(v, hp, il, {.scales_applied = false});
    }
  }
};

class OlmoModel final : public FamilyModel<OlmoWeights> {
 public:
  using FamilyModel::FamilyModel;

 private:
  void run_layers(std::span<const BatchRow> rows, std::span<const int32_t> cells, KvCache& cache,
                  ForwardContext& ctx, std::span<float> logits) const override {
    const auto& h = hparams_;
    const auto n = rows.size();
    const auto [x, normed, branch, pass] = start_layers(h, rows, cells, ctx, w_.embedding, w_.rope);
    for (const int64_t il : ctx.stage.layers()) {
      const OlmoLayer& layer = w_.layers[static_cast<size_t>(il)];
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

void read_olmo(const HParamReader& keys, ModelHParams& hp) {
  // llama.cpp's get_key: required.
  if (!keys.has("attention.layer_norm_epsilon")) {
    keys.invalid("missing key " + keys.key("attention.layer_norm_epsilon"));
  }
  hp.norm_eps = keys.float_or("attention.layer_norm_epsilon", 0.0f);
  hp.uses_rms_norm = false;
  if (!(hp.norm_eps > 0.0f)) keys.invalid("attention.layer_norm_epsilon must be positive");
  hp.clamp_kqv = keys.float_or("attention.clamp_kqv", 0.0f);
  if (hp.clamp_kqv < 0.0f) keys.invalid("attention.clamp_kqv must not be negative");
  require_whole_rotation(keys, hp);
  hp.attention_scale = 0.0f;
}

// OLMo-7B-0424's converter writes clip_qkv (8 there); here small enough
// that random weights' projections reach it.
void write_olmo(const ModelGeometry& g, std::vector<gguf::KeyValue>& keys) {
  keys.push_back({"olmo.attention.layer_norm_epsilon", gguf::Value(static_cast<float>(g.rms_eps))});
  keys.push_back({"olmo.attention.clamp_kqv", gguf::Value(0.5f)});
}

}  // namespace

const Family kOlmoFamily{.arch = "olmo",
                         .neox_rope = false,
                         .make = make_model<OlmoModel>,
                         .read_hparams = read_olmo,
                         .tensors = tensors_of<OlmoWeights>,
                         .write_hparams = write_olmo,
                         .fixed_head_dim = true};

}  // namespace cortiq
