// Microsoft's Phi-2 and Phi-1.5 (`phi2`): a decoder whose attention and
// feed-forward branches both read one layer norm of the residual stream and
// are added to it together ("parallel residual"), with NeoX RoPE over part
// of each head (rope.dimension_count: 32 of Phi-2's 80), biases everywhere
// and an ungated GELU feed-forward:
//
//   x = token_embd[token]
//   for each layer:
//     h = layer_norm(x) * attn_norm + attn_norm_b
//     x += attention(h) + (down(gelu(up(h) + up_b)) + down_b)
//              q, k, v with their biases; q *= 1/sqrt(head_dim) after RoPE;
//              output bias
//   logits = output(layer_norm(x) * output_norm + output_norm_b) + output_b
//
// llama.cpp scales the queries (not the scores) by 1/sqrt(head size),
// whatever attention.scale says, shapes the attention output [n_embd,
// n_embd], and applies no FFN scales (build_ffn gets NULL for them).
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

struct Phi2Layer {
  Norm attn_norm;
  AttentionWeights attn;
  FfnWeights ffn;
};

struct Phi2Weights {
  TokenEmbedding embedding;
  OutputHead head;
  RopeTables rope;
  std::vector<Phi2Layer> layers;

  void visit(TensorVisitor& v, const ModelHParams& hp) {
    embedding.visit(v, hp);
    head.visit(v, hp, embedding, OutputMatrix::own, OutputBias::required, NormKind::layer);
    for (int64_t il = 0; il < hp.n_layer; ++il) {
      Phi2Layer& layer = layers.emplace_back();
      layer.attn_norm.visit(v, layer_tensor_name(il, "attn_norm"), hp.n_embd, NormKind::layer,
                            hp.norm_eps);
      layer.attn.visit(v, hp, il, {.output_bias = AttnOutputBias::required});
      layer.ffn.visit(v, hp, il,
                      {.gated = false, .biases_required = true, .scales_applied = false});
    }
  }
};

class Phi2Model final : public FamilyModel<Phi2Weights> {
 public:
  using FamilyModel::FamilyModel;

 private:
  void run_layers(std::span<const BatchRow> rows, std::span<const int32_t> cells, KvCache& cache,
                  ForwardContext& ctx, std::span<float> logits) const override {
    const auto& h = hparams_;
    const auto n = rows.size();
    const auto [x, normed, branch, pass] = start_layers(h, rows, cells, ctx, w_.embedding, w_.rope);
    const Tensor ffn_out = ctx.backend.scratch(ctx.buffers.parallel, x.size());
    for (const int64_t il : ctx.stage.layers()) {
      const Phi2Layer& layer = w_.layers[static_cast<size_t>(il)];
      layer.attn_norm.apply(ctx, x, normed);
      attention(layer.attn, h, il, pass, cache, ctx, normed, branch);
      ffn(layer.ffn, FfnActivation::gelu, h, il, static_cast<int64_t>(n), ctx, normed, ffn_out);
      // llama.cpp: (attention + ffn) + x.
      ctx.backend.add(branch, ffn_out);
      ctx.backend.add(x, branch);
    }
    w_.head.apply(h, rows, x, ctx, logits);
  }
};

void read_phi2(const HParamReader& keys, ModelHParams& hp) {
  // Required, as in llama.cpp.
  if (!keys.has("attention.layer_norm_epsilon")) {
    keys.invalid("missing key " + keys.key("attention.layer_norm_epsilon"));
  }
  hp.norm_eps = keys.float_or("attention.layer_norm_epsilon", 0.0f);
  hp.uses_rms_norm = false;
  if (!(hp.norm_eps > 0.0f)) keys.invalid("attention.layer_norm_epsilon must be positive");
  if (hp.head_dim_k != hp.head_dim_v) keys.invalid("key and value heads must be as wide");
  hp.attention_scale = 0.0f;
  hp.scale_queries = true;
}

// The converter's keys: the layer norm epsilon and the partial rotary
// dimension (Phi-2 rotates 40 % of each head).
void write_phi2(const ModelGeometry& g, std::vector<gguf::KeyValue>& keys) {
  const std::string p = "phi2.";
  keys.push_back({p + "attention.layer_norm_epsilon", gguf::Value(static_cast<float>(g.rms_eps))});
  int64_t rot = (g.resolved_head_dim() * 2 / 5) & ~int64_t{1};
  if (rot == 0) rot = g.resolved_head_dim();
  for (gguf::KeyValue& kv : keys) {
    if (kv.key == p + "rope.dimension_count") kv.value = u32_value(rot);
  }
}

// Phi-2's checkpoints have Q/K/V biases.
constexpr std::string_view kPhi2Optional[] = {"attn_q.bias", "attn_k.bias", "attn_v.bias"};

}  // namespace

const Family kPhi2Family{.arch = "phi2",
                         .neox_rope = true,
                         .make = make_model<Phi2Model>,
                         .read_hparams = read_phi2,
                         .tensors = tensors_of<Phi2Weights>,
                         .write_hparams = write_phi2,
                         .fixed_head_dim = true,
                         .converted_optional = kPhi2Optional};

}  // namespace cortiq
