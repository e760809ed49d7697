// Preferred Networks' PLaMo 3 (`plamo3`: plamo-3-nict-2b / 8b / 31b):
// Gemma 2's sandwich norms around a Llama-like decoder with fused
// projections, Q/K norms and sliding-window layers:
//
//   x = token_embd[token]
//   for each layer:
//     h = attention(rms_norm(x) * attn_norm)      one attn_qkv projection (no
//                                                 bias); Q, K: RMS norm per head,
//                                                 then RoPE (NeoX pairs)
//     x += rms_norm(h) * post_attention_norm
//     h = down(silu(g) * u),  [g | u] = up(rms_norm(x) * ffn_norm)
//     x += rms_norm(h) * post_ffw_norm
//   logits = output(rms_norm(x) * output_norm)    output = token_embd if tied
//
// Windows: with attention.sliding_window > 0, seven window layers per global
// one (attention.sliding_window_pattern, 8); the window layers rotate with
// rope.freq_base_swa (llama.cpp's default 10000, not the global base) and no
// frequency scaling. Head counts and FFN widths may vary by layer.
// llama.cpp names the two post norms without the ".weight" suffix
// (blk.N.post_attention_norm, blk.N.post_ffw_norm), so that is what it reads
// and what gen-model writes. The scores are scaled by 1/sqrt(head size);
// the attn_qkv and FFN scales are read but not applied (the graph multiplies
// without them), attn_output's is.
#include <memory>

#include "formats/gguf/gguf_file.hpp"
#include "kernels/cpu/activations.hpp"
#include "model/arch/arch.hpp"
#include "model/arch/family_support.hpp"
#include "model/blocks/attention.hpp"
#include "model/blocks/embedding.hpp"
#include "model/blocks/ffn.hpp"
#include "model/decoder_model.hpp"
#include "model/gen_model/arch_spec.hpp"
#include "model/rope_setup.hpp"
#include "model/weights.hpp"

namespace cortiq {

namespace {

struct Plamo3Layer {
  std::vector<float> attn_norm;
  AttentionWeights attn;
  std::vector<float> attn_post_norm;
  std::vector<float> ffn_norm;
  FfnWeights ffn;
  std::vector<float> ffn_post_norm;
};

struct Plamo3Weights {
  TokenEmbedding embedding;
  OutputHead head;
  RopeTables rope;
  std::vector<Plamo3Layer> layers;

  void visit(TensorVisitor& v, const ModelHParams& hp) {
    embedding.visit(v, hp);
    head.visit(v, hp, embedding, OutputMatrix::own_or_tied);
    const auto norm = [&](std::vector<float>& w, int64_t il, const char* name) {
      v.vector(w, layer_tensor_name(il, name), hp.n_embd, TensorKind::norm);
    };
    for (int64_t il = 0; il < hp.n_layer; ++il) {
      Plamo3Layer& layer = layers.emplace_back();
      norm(layer.attn_norm, il, "attn_norm.weight");
      layer.attn.visit(v, hp, il,
                       {.qkv = QkvForm::fused,
                        .fused_qkv_written = true,
                        .qkv_effect = QkvEffect::none,
                        .qk_norm = QkNorm::required});
      norm(layer.attn_post_norm, il, "post_attention_norm");
      norm(layer.ffn_norm, il, "ffn_norm.weight");
      norm(layer.ffn_post_norm, il, "post_ffw_norm");
      layer.ffn.visit(v, hp, il, {.scales_applied = false, .fused_gate_up = true});
    }
  }
};

class Plamo3Model final : public FamilyModel<Plamo3Weights> {
 public:
  using FamilyModel::FamilyModel;

 private:
  void run_layers(std::span<const BatchRow> rows, std::span<const int32_t> cells, KvCache& cache,
                  ForwardContext& ctx, std::span<float> logits) const override {
    const auto& h = hparams_;
    const auto n = static_cast<int64_t>(rows.size());
    const auto [x, normed, branch, pass] = start_layers(h, rows, cells, ctx, w_.embedding, w_.rope);
    for (const int64_t il : ctx.stage.layers()) {
      const Plamo3Layer& layer = w_.layers[static_cast<size_t>(il)];
      rms_norm(ctx, h, x, layer.attn_norm, normed);
      attention(layer.attn, h, il, pass, cache, ctx, normed, branch);
      rms_norm(ctx, h, branch, layer.attn_post_norm, branch);
      ctx.backend.add(x, branch);
      rms_norm(ctx, h, x, layer.ffn_norm, normed);
      ffn(layer.ffn, FfnActivation::swiglu, h, il, n, ctx, normed, branch);
      rms_norm(ctx, h, branch, layer.ffn_post_norm, branch);
      ctx.backend.add(x, branch);
    }
    w_.head.apply(h, rows, x, ctx, logits);
  }
};

void read_plamo3(const HParamReader& keys, ModelHParams& hp) {
  keys.require("attention.layer_norm_rms_epsilon");
  hp.attention_scale = 0.0f;
  hp.sliding_window = keys.uint_or("attention.sliding_window", 0);
  if (hp.sliding_window > 0) {
    hp.rope_local.freq_base = keys.float_or("rope.freq_base_swa", 10000.0f);
    hp.rope_local.freq_scale = 1.0f;
    set_sliding_window_pattern(hp, hp.sliding_window,
                               keys.uint_or("attention.sliding_window_pattern", 8),
                               RopeSlot::local);
  }
}

// PLaMo 3's converter writes its window (shorter here, so the goldens cross
// it) and pattern (8: seven window layers per global one).
void write_plamo3(const ModelGeometry& g, std::vector<gguf::KeyValue>& keys) {
  const std::string p = "plamo3.";
  keys.push_back({p + "attention.sliding_window", u32_value(g.resolved_sliding_window())});
  keys.push_back({p + "attention.sliding_window_pattern", gguf::Value(uint32_t{8})});
}

}  // namespace

const Family kPlamo3Family{.arch = "plamo3",
                           .neox_rope = true,
                           .make = make_model<Plamo3Model>,
                           .read_hparams = read_plamo3,
                           .tensors = tensors_of<Plamo3Weights>,
                           .write_hparams = write_plamo3};

}  // namespace cortiq
