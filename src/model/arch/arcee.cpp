// Arcee's AFM (`arcee`: AFM-4.5B): Llama with an ungated feed-forward whose
// activation is the squared ReLU:
//
//   x = token_embd[token]
//   for each layer:
//     x += attention(rms_norm(x) * attn_norm)     GQA, RoPE on adjacent pairs
//                                                 (rope_freqs optional)
//     x += down(relu(up(h))^2),  h = rms_norm(x) * ffn_norm
//   logits = output(rms_norm(x) * output_norm)    output = token_embd if tied
//
// llama.cpp rotates the whole head, scales the scores by 1/sqrt(head size)
// (it never reads attention.scale for arcee), reads no attention output
// bias and applies no FFN scales.
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

struct ArceeWeights {
  TokenEmbedding embedding;
  OutputHead head;
  RopeTables rope;
  std::vector<PreNormLayer> layers;

  void visit(TensorVisitor& v, const ModelHParams& hp) {
    embedding.visit(v, hp);
    head.visit(v, hp, embedding);
    rope.visit(v, hp);
    for (int64_t il = 0; il < hp.n_layer; ++il) {
      layers.emplace_back().visit(v, hp, il, {}, {.gated = false, .scales_applied = false});
    }
  }
};

class ArceeModel final : public FamilyModel<ArceeWeights> {
 public:
  using FamilyModel::FamilyModel;

 private:
  void run_layers(std::span<const BatchRow> rows, std::span<const int32_t> cells, KvCache& cache,
                  ForwardContext& ctx, std::span<float> logits) const override {
    run_pre_norm_layers(w_, hparams_, rows, cells, cache, ctx, logits, FfnActivation::relu_sqr);
  }
};

}  // namespace

const Family kArceeFamily{.arch = "arcee",
                          .neox_rope = false,
                          .make = make_model<ArceeModel>,
                          .read_hparams = read_whole_rotation_hparams,
                          .tensors = tensors_of<ArceeWeights>};

}  // namespace cortiq
