// TII's Falcon-H1 (`falcon-h1`: 0.5B ... 34B): every layer runs attention
// and a Mamba-2 mixer side by side on the same normed input, then a SwiGLU
// FFN:
//
//   x = token_embd[token]
//   for each layer:
//     h  = rms_norm(x) * attn_norm
//     x += attention(h) + mamba2(h)     NeoX RoPE, scores by
//                                       attention.scale (0: 1/sqrt(head size)),
//                                       Q/K/V biases when present
//     x += ffn(rms_norm(x) * ffn_norm)  SwiGLU, biases when present
//   logits = output(rms_norm(x) * output_norm)    output = token_embd if absent
//
// The checkpoints' muP multipliers are folded into the weights by the
// converter. As llama.cpp's graph: attn_output.bias and rope_freqs.weight
// are read and not used,
// the FFN's scales are read and not applied, and a Mamba-2 mixer without
// ssm_norm skips its grouped norm. The FFN norm is `blk.N.ffn_norm`, with no
// ".weight" (llama.cpp's name for this family). Each layer keeps both KV
// rows and a Mamba-2 state per sequence.
#include <memory>

#include "kernels/cpu/activations.hpp"
#include "model/arch/arch.hpp"
#include "model/arch/family_support.hpp"
#include "model/blocks/attention.hpp"
#include "model/blocks/embedding.hpp"
#include "model/blocks/ffn.hpp"
#include "model/blocks/mamba2.hpp"
#include "model/decoder_model.hpp"
#include "model/gen_model/arch_spec.hpp"
#include "model/rope_setup.hpp"
#include "model/weights.hpp"

namespace cortiq {

namespace {

struct FalconH1Layer {
  std::vector<float> attn_norm, ffn_norm;
  AttentionWeights attn;
  Mamba2Weights ssm;
  FfnWeights ffn;
};

struct FalconH1Weights {
  TokenEmbedding embedding;
  OutputHead head;
  RopeTables rope;
  std::vector<FalconH1Layer> layers;

  // As llama.cpp's falcon-h1 loader.
  void visit(TensorVisitor& v, const ModelHParams& hp) {
    embedding.visit(v, hp);
    head.visit(v, hp, embedding, OutputMatrix::own_or_tied);
    // Loaded, and passed to no RoPE by llama.cpp's graph.
    v.without_effect("rope_freqs.weight", hp.rope.n_dims / 2, TensorKind::norm);
    for (int64_t il = 0; il < hp.n_layer; ++il) {
      const auto name = [&](std::string_view what) { return layer_tensor_name(il, what); };
      FalconH1Layer& layer = layers.emplace_back();
      layer.ssm.visit(v, hp, il, /*norm_optional=*/true);
      layer.attn.visit(v, hp, il, {});
      v.without_effect(name("attn_output.bias"), hp.n_embd, TensorKind::bias);
      v.vector(layer.attn_norm, name("attn_norm.weight"), hp.n_embd, TensorKind::norm);
      v.vector(layer.ffn_norm, name("ffn_norm"), hp.n_embd, TensorKind::norm);
      layer.ffn.visit(v, hp, il, {.biases = true, .scales_applied = false});
    }
  }
};

class FalconH1Model final : public FamilyModel<FalconH1Weights> {
 public:
  using FamilyModel::FamilyModel;

 private:
  void run_layers(std::span<const BatchRow> rows, std::span<const int32_t> cells, KvCache& cache,
                  ForwardContext& ctx, std::span<float> logits) const override {
    const auto& h = hparams_;
    const auto n = static_cast<int64_t>(rows.size());
    const LayerStream s = start_layers(h, rows, cells, ctx, w_.embedding, w_.rope);
    const Tensor mixer = ctx.backend.scratch(ctx.buffers.parallel, s.x.size());
    for (const int64_t il : ctx.stage.layers()) {
      const FalconH1Layer& layer = w_.layers[static_cast<size_t>(il)];
      rms_norm(ctx, h, s.x, layer.attn_norm, s.normed);
      attention(layer.attn, h, il, s.pass, cache, ctx, s.normed, s.branch);
      mamba2(layer.ssm, h, il, rows, cache, ctx, s.normed, mixer);
      // llama.cpp: (attention + mixer), then the residual.
      ctx.backend.add(s.branch.first(s.x.size()), mixer);
      ctx.backend.add(s.x, s.branch);
      rms_norm(ctx, h, s.x, layer.ffn_norm, s.normed);
      ffn(layer.ffn, FfnActivation::swiglu, h, il, n, ctx, s.normed, s.branch);
      ctx.backend.add(s.x, s.branch);
    }
    w_.head.apply(h, rows, s.x, ctx, logits);
  }
};

void read_falcon_h1(const HParamReader& keys, ModelHParams& hp) {
  keys.require("attention.layer_norm_rms_epsilon");
  read_ssm_hparams(keys, hp);
  if (hp.head_dim_k != hp.head_dim_v) keys.invalid("key and value heads must be as wide");
  for (LayerSpec& layer : hp.layers) {
    layer.state_width = mamba2_state_width(hp);
    layer.recurrent = RecurrentKind::mamba2;
  }
}

// Falcon-H1-0.5B's shape in small: the Mamba-2 mixer as gen-model writes
// mamba2's, beside attention in every layer.
void write_falcon_h1(const ModelGeometry& g, std::vector<gguf::KeyValue>& keys) {
  write_mamba2_keys(g, "falcon-h1", keys);
}

}  // namespace

const Family kFalconH1Family{.arch = "falcon-h1",
                             .neox_rope = true,
                             .make = make_model<FalconH1Model>,
                             .read_hparams = read_falcon_h1,
                             .tensors = tensors_of<FalconH1Weights>,
                             .write_hparams = write_falcon_h1};

}  // namespace cortiq
