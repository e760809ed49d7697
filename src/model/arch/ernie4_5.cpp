// Baidu's ERNIE 4.5 dense models (`ernie4_5`: ERNIE-4.5-0.3B): Llama's
// card; the MoE models are another architecture (`ernie4_5-moe`).
//
//   x = token_embd[token]
//   for each layer:
//     x += attention(rms_norm(x) * attn_norm)     GQA, RoPE on adjacent pairs
//     x += down(silu(gate(h)) * up(h)),  h = rms_norm(x) * ffn_norm
//   logits = output(rms_norm(x) * output_norm)    output = token_embd if tied
//
// llama.cpp reads an optional attn_output.bias but its graph passes none to
// the output projection, so it changes nothing. The scores are scaled by
// 1/sqrt(head size) (attention.scale is never read), the whole head is
// rotated (no rope_freqs) and the FFN scales are not applied (build_ffn gets
// none). rope.dimension_sections is read for PaddleOCR only.
#include <memory>

#include "kernels/cpu/activations.hpp"
#include "model/arch/arch.hpp"
#include "model/arch/family_support.hpp"
#include "model/arch/pre_norm_layer.hpp"
#include "model/blocks/attention.hpp"
#include "model/blocks/embedding.hpp"
#include "model/blocks/ffn.hpp"
#include "model/decoder_model.hpp"
#include "model/rope_setup.hpp"
#include "model/weights.hpp"

namespace cortiq {

namespace {

struct ErnieWeights {
  TokenEmbedding embedding;
  OutputHead head;
  RopeTables rope;
  std::vector<PreNormLayer> layers;

  void visit(TensorVisitor& v, const ModelHParams& hp) {
    embedding.visit(v, hp);
    head.visit(v, hp, embedding, OutputMatrix::own_or_tied);
    for (int64_t il = 0; il < hp.n_layer; ++il) {
      layers.emplace_back().visit(v, hp, il, {}, {.scales_applied = false});
      v.without_effect(layer_tensor_name(il, "attn_output.bias"), hp.n_embd, TensorKind::bias);
    }
  }
};

class ErnieModel final : public FamilyModel<ErnieWeights> {
 public:
  using FamilyModel::FamilyModel;

 private:
  void run_layers(std::span<const BatchRow> rows, std::span<const int32_t> cells, KvCache& cache,
                  ForwardContext& ctx, std::span<float> logits) const override {
    run_pre_norm_layers(w_, hparams_, rows, cells, cache, ctx, logits, FfnActivation::swiglu);
  }
};

}  // namespace

const Family kErnie45Family{.arch = "ernie4_5",
                            .neox_rope = false,
                            .make = make_model<ErnieModel>,
                            .read_hparams = read_whole_rotation_hparams,
                            .tensors = tensors_of<ErnieWeights>};

}  // namespace cortiq
