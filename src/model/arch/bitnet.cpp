// Microsoft's BitNet b1.58 (`bitnet`: bitnet_b1_58-large / 3B): Llama's card
// with ternary weights (the converter stores them dequantized, each matrix
// times its scale) and an RMS "sub-norm" inside each branch:
//
//   x = token_embd[token]
//   for each layer:
//     a = attend(rms_norm(x) * attn_norm)         GQA, RoPE: NeoX pairs
//     x += attn_output(rms_norm(a) * attn_sub_norm)
//     g = silu(gate(h)) * up(h),  h = rms_norm(x) * ffn_norm
//     x += down(rms_norm(g) * ffn_sub_norm)
//   logits = token_embd(rms_norm(x) * output_norm)  always tied
//
// llama.cpp creates attn_{q,k,v,output} itself (no biases, no fused Q/K/V)
// and applies every optional NAME.scale, the FFN's too. It shapes attn_q and
// attn_output [n_embd, n_embd]; the scores are scaled by 1/sqrt(head size)
// (attention.scale is never read).
#include <memory>

#include "formats/gguf/gguf_file.hpp"
#include "kernels/cpu/activations.hpp"
#include "model/arch/arch.hpp"
#include "model/arch/family_support.hpp"
#include "model/arch/pre_norm_layer.hpp"
#include "model/blocks/attention.hpp"
#include "model/blocks/embedding.hpp"
#include "model/blocks/ffn.hpp"
#include "model/decoder_model.hpp"
#include "model/gen_model/arch_spec.hpp"
#include "model/rope_setup.hpp"
#include "model/weights.hpp"

namespace cortiq {

namespace {

struct BitnetWeights {
  TokenEmbedding embedding;
  OutputHead head;
  RopeTables rope;
  std::vector<PreNormLayer> layers;

  void visit(TensorVisitor& v, const ModelHParams& hp) {
    embedding.visit(v, hp);
    head.visit(v, hp, embedding, OutputMatrix::always_tied);
    for (int64_t il = 0; il < hp.n_layer; ++il) {
      // RMS sub-norms inside both branches: attn_sub_norm, ffn_sub_norm.
      layers.emplace_back().visit(v, hp, il,
                                  {.qkv = QkvForm::separate_without_biases, .sub_norm = true},
                                  {.sub_norm = true});
    }
  }
};

class BitnetModel final : public FamilyModel<BitnetWeights> {
 public:
  using FamilyModel::FamilyModel;

 private:
  void run_layers(std::span<const BatchRow> rows, std::span<const int32_t> cells, KvCache& cache,
                  ForwardContext& ctx, std::span<float> logits) const override {
    run_pre_norm_layers(w_, hparams_, rows, cells, cache, ctx, logits, FfnActivation::swiglu);
  }
};

void read_bitnet(const HParamReader& keys, ModelHParams& hp) {
  keys.require("attention.layer_norm_rms_epsilon");
  if (hp.head_dim_k != hp.head_dim_v) keys.invalid("keys and values need one head size");
  hp.attention_scale = 0.0f;
}

}  // namespace

const Family kBitnetFamily{.arch = "bitnet",
                           .neox_rope = true,
                           .make = make_model<BitnetModel>,
                           .read_hparams = read_bitnet,
                           .tensors = tensors_of<BitnetWeights>,
                           .fixed_head_dim = true};

}  // namespace cortiq
