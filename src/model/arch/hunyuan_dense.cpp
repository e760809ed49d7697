// Tencent's Hunyuan dense models (`hunyuan-dense`: Hunyuan-0.5B/1.8B/4B/7B)
// and Maincode's Maincoder (`maincoder`: Maincoder-1B): Llama's pre-norm
// decoder with RMS norms on each query and key head applied after RoPE:
//
//   x = token_embd[token]
//   for each layer:
//     x += attention(rms_norm(x) * attn_norm)
//            q, k = rope(q), rope(k); then per head
//            q, k = rms_norm(q) * attn_q_norm, rms_norm(k) * attn_k_norm
//     x += down(silu(gate(h)) * up(h)),  h = rms_norm(x) * ffn_norm
//   logits = output(rms_norm(x) * output_norm)   output.weight: the embedding if absent
//
// RoPE: NeoX pairs (hunyuan-dense), adjacent pairs (maincoder), over the
// whole head (llama.cpp asserts it; keys and values have one head size).
// The scores are scaled by 1/sqrt(head size) whatever attention.scale says;
// no FFN scale is applied (build_ffn gets NULL for them).
// hunyuan-dense: rope.scaling.alpha (NTK-aware, XDRoPE) multiplies the
// base by alpha^(d / (d - 2)), d the head size, as llama.cpp's loader does
// (Hunyuan's converter usually writes the scaled base itself). Its
// rope.dimension_sections only matter to M-RoPE, which the family's RoPE
// type (NeoX) never is: text positions rotate the same either way.
#include <cmath>
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

struct NormAfterRopeLayer {
  Norm attn_norm;
  AttentionWeights attn;
  Norm ffn_norm;
  FfnWeights ffn;
};

struct NormAfterRopeWeights {
  TokenEmbedding embedding;
  OutputHead head;
  RopeTables rope;
  std::vector<NormAfterRopeLayer> layers;

  // As llama.cpp's load_arch_tensors of both (the same list), plus its
  // generic per-tensor scales (which the attention and FFN blocks add).
  void visit(TensorVisitor& v, const ModelHParams& hp) {
    embedding.visit(v, hp);
    head.visit(v, hp, embedding, OutputMatrix::own_or_tied);
    for (int64_t il = 0; il < hp.n_layer; ++il) {
      NormAfterRopeLayer& layer = layers.emplace_back();
      layer.attn_norm.visit(v, layer_tensor_name(il, "attn_norm"), hp.n_embd, NormKind::rms,
                            hp.rms_eps);
      layer.attn.visit(v, hp, il, {.qk_norm = QkNorm::required, .qk_norm_after_rope = true});
      layer.ffn_norm.visit(v, layer_tensor_name(il, "ffn_norm"), hp.n_embd, NormKind::rms,
                           hp.rms_eps);
      layer.ffn.visit(v, hp, il, {.scales_applied = false});
    }
  }
};

class NormAfterRopeModel final : public FamilyModel<NormAfterRopeWeights> {
 public:
  using FamilyModel::FamilyModel;

 private:
  void run_layers(std::span<const BatchRow> rows, std::span<const int32_t> cells, KvCache& cache,
                  ForwardContext& ctx, std::span<float> logits) const override {
    const auto& h = hparams_;
    const auto n = rows.size();
    const auto [x, normed, branch, pass] = start_layers(h, rows, cells, ctx, w_.embedding, w_.rope);
    for (const int64_t il : ctx.stage.layers()) {
      const NormAfterRopeLayer& layer = w_.layers[static_cast<size_t>(il)];
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

void read_hunyuan_dense(const HParamReader& keys, ModelHParams& hp) {
  read_whole_rotation_hparams(keys, hp);
  const float alpha = keys.float_or("rope.scaling.alpha", 0.0f);
  if (alpha > 0.0f) {
    // In float, as llama.cpp's loader computes it.
    const auto d = static_cast<float>(hp.head_dim_k);
    hp.rope.freq_base *= std::pow(alpha, d / (d - 2.0f));
    hp.rope_local = hp.rope;
  }
}

// Hunyuan's converter writes RoPE scaling "none"; the alpha key (here
// small) is what the XDRoPE checkpoints carry instead of a scaled base.
void write_hunyuan_dense(const ModelGeometry& g, std::vector<gguf::KeyValue>& keys) {
  keys.push_back({"hunyuan-dense.rope.scaling.type", gguf::Value(std::string("none"))});
  keys.push_back({"hunyuan-dense.rope.scaling.alpha", gguf::Value(1.5f)});
}

}  // namespace

const Family kHunyuanDenseFamily{.arch = "hunyuan-dense",
                                 .neox_rope = true,
                                 .make = make_model<NormAfterRopeModel>,
                                 .read_hparams = read_hunyuan_dense,
                                 .tensors = tensors_of<NormAfterRopeWeights>,
                                 .write_hparams = write_hunyuan_dense};
const Family kMaincoderFamily{.arch = "maincoder",
                              .neox_rope = false,
                              .make = make_model<NormAfterRopeModel>,
                              .read_hparams = read_whole_rotation_hparams,
                              .tensors = tensors_of<NormAfterRopeWeights>};

}  // namespace cortiq
