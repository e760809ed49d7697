// Six decoders llama.cpp runs with copies of Llama's graph, each with its
// own tensor list: OrionStar's Orion (`orion`: layer norms), Shanghai AI
// Lab's InternLM2 (`internlm2`), XVERSE (`xverse`), Baichuan 1 / 2
// (`baichuan`), Huawei's openPangu-Embedded (`pangu-embedded`) and PFN's
// PLaMo (`plamo`: parallel branches).
//
//   x = token_embd[token]
//   for each layer:
//     x += attention(norm(x, attn_norm))      GQA; RoPE: NeoX (orion, pangu,
//                                             plamo), adjacent pairs (the
//                                             others); baichuan: only its 7B
//                                             (32 layers) has RoPE
//     x += down(silu(gate(h)) * up(h)),  h = norm(x, ffn_norm)
//   logits = output(norm(x, output_norm))     output.weight: always its own;
//                                             pangu: the embedding if absent
//
//   plamo, one norm and both branches from it:
//     h = norm(x, attn_norm);  x += attention(h) + down(silu(gate(h)) * up(h))
//
//   norm: layer norm with weight and bias (orion, attention.layer_norm_epsilon),
//         RMS norm (the others, attention.layer_norm_rms_epsilon)
//
// Biases: the optional Q/K/V ones (llama.cpp's create_tensor_qkv) and
// pangu's attention output bias (required); internlm2's graph passes wo_b,
// which its loader never creates. None reads ARCH.attention.scale (scores:
// 1/sqrt(head size)) or applies FFN scales (build_ffn gets NULL for them).
// Except pangu, llama.cpp shapes attn_q and attn_output [n_embd, n_embd]
// (heads tile n_embd). All graphs assert that RoPE turns the whole head and
// that keys and values have one head size.
// Baichuan 13B (40 layers) uses ALiBi with max bias 8 (llama.cpp fixes it)
// instead of RoPE. Any other layer count is llama.cpp's LLM_TYPE_UNKNOWN:
// no RoPE, no ALiBi.
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

struct CopyLayer {
  Norm attn_norm;
  AttentionWeights attn;
  Norm ffn_norm;  // none in plamo
  FfnWeights ffn;
};

struct CopyWeights {
  TokenEmbedding embedding;
  OutputHead head;
  RopeTables rope;
  std::vector<CopyLayer> layers;

  // Exactly what each family's load_arch_tensors reads, plus llama.cpp's
  // generic per-tensor scales (which the attention and FFN blocks add).
  void visit(TensorVisitor& v, const ModelHParams& hp) {
    const bool pangu = hp.arch == "pangu-embedded", parallel = hp.arch == "plamo";
    const NormKind kind = hp.uses_rms_norm ? NormKind::rms : NormKind::layer;
    const float eps = hp.uses_rms_norm ? hp.rms_eps : hp.norm_eps;
    embedding.visit(v, hp);
    head.visit(v, hp, embedding, pangu ? OutputMatrix::own_or_tied : OutputMatrix::own,
               OutputBias::none, kind);
    // pangu-embedded reads rope_freqs but its graph passes no factors to RoPE.
    if (pangu) v.without_effect("rope_freqs.weight", hp.rope.n_dims / 2, TensorKind::norm);
    for (int64_t il = 0; il < hp.n_layer; ++il) {
      CopyLayer& layer = layers.emplace_back();
      layer.attn_norm.visit(v, layer_tensor_name(il, "attn_norm"), hp.n_embd, kind, eps);
      layer.attn.visit(v, hp, il,
                       {.output_bias = pangu ? AttnOutputBias::required : AttnOutputBias::none});
      if (!parallel) {
        layer.ffn_norm.visit(v, layer_tensor_name(il, "ffn_norm"), hp.n_embd, kind, eps);
      }
      layer.ffn.visit(v, hp, il, {.scales_applied = false});
    }
  }
};

class CopyModel final : public DecoderModel {
 public:
  CopyModel(ModelHParams hp, WeightBinder& binder) : DecoderModel(std::move(hp), binder) {
    w_.visit(binder, hparams_);
    w_.rope.setup(hparams_);
  }

 private:
  void run_layers(std::span<const BatchRow> rows, std::span<const int32_t> cells, KvCache& cache,
                  ForwardContext& ctx, std::span<float> logits) const override {
    const auto& h = hparams_;
    const auto n = rows.size();
    const auto [x, normed, branch, pass] = start_layers(h, rows, cells, ctx, w_.embedding, w_.rope);
    for (const int64_t il : ctx.stage.layers()) {
      const CopyLayer& layer = w_.layers[static_cast<size_t>(il)];
      layer.attn_norm.apply(ctx, x, normed);
      attention(layer.attn, h, il, pass, cache, ctx, normed, branch);
      ctx.backend.add(x, branch);
      // plamo's FFN reads the attention's input; llama.cpp adds
      // (ffn + attention) + x, which differs from this in the last bit only.
      if (!parallel_) layer.ffn_norm.apply(ctx, x, normed);
      ffn(layer.ffn, FfnActivation::swiglu, h, il, static_cast<int64_t>(n), ctx, normed, branch);
      ctx.backend.add(x, branch);
    }
    w_.head.apply(h, rows, x, ctx, logits);
  }

  CopyWeights w_;
  bool parallel_ = hparams_.arch == "plamo";
};

// What all six read: their norm's epsilon (llama.cpp's get_key, no
// default) and no attention.scale; what all six graphs assert.
void read_common(const HParamReader& keys, ModelHParams& hp, bool layer_norm) {
  const char* eps_key =
      layer_norm ? "attention.layer_norm_epsilon" : "attention.layer_norm_rms_epsilon";
  if (!keys.has(eps_key)) keys.invalid("missing key " + keys.key(eps_key));
  if (layer_norm) {
    hp.norm_eps = keys.float_or(eps_key, 0.0f);
    hp.uses_rms_norm = false;
    if (!(hp.norm_eps > 0.0f)) keys.invalid("attention.layer_norm_epsilon must be positive");
  }
  if (hp.rope.n_dims != hp.head_dim_k || hp.head_dim_v != hp.head_dim_k) {
    keys.invalid(hp.arch + " needs rope.dimension_count = key_length = value_length");
  }
  hp.attention_scale = 0.0f;
}

void read_orion(const HParamReader& keys, ModelHParams& hp) {
  read_common(keys, hp, /*layer_norm=*/true);
}

void read_rms(const HParamReader& keys, ModelHParams& hp) {
  read_common(keys, hp, /*layer_norm=*/false);
}

// llama.cpp picks the position encoding by layer count (its model type).
void read_baichuan(const HParamReader& keys, ModelHParams& hp) {
  read_common(keys, hp, /*layer_norm=*/false);
  if (hp.n_layer == 32) return;                    // 7B: RoPE
  if (hp.n_layer == 40) hp.alibi_max_bias = 8.0f;  // 13B: ALiBi
  for (LayerSpec& layer : hp.layers) layer.rope = RopeSlot::none;
}

void write_orion(const ModelGeometry& g, std::vector<gguf::KeyValue>& keys) {
  keys.push_back(
      {"orion.attention.layer_norm_epsilon", gguf::Value(static_cast<float>(g.rms_eps))});
}

}  // namespace

const Family kOrionFamily{.arch = "orion",
                          .neox_rope = true,
                          .make = make_model<CopyModel>,
                          .read_hparams = read_orion,
                          .tensors = tensors_of<CopyWeights>,
                          .write_hparams = write_orion,
                          .fixed_head_dim = true};
const Family kInternLm2Family{.arch = "internlm2",
                              .neox_rope = false,
                              .make = make_model<CopyModel>,
                              .read_hparams = read_rms,
                              .tensors = tensors_of<CopyWeights>,
                              .fixed_head_dim = true};
const Family kXverseFamily{.arch = "xverse",
                           .neox_rope = false,
                           .make = make_model<CopyModel>,
                           .read_hparams = read_rms,
                           .tensors = tensors_of<CopyWeights>,
                           .fixed_head_dim = true};
const Family kBaichuanFamily{.arch = "baichuan",
                             .neox_rope = false,
                             .make = make_model<CopyModel>,
                             .read_hparams = read_baichuan,
                             .tensors = tensors_of<CopyWeights>,
                             .fixed_head_dim = true};
const Family kPanguEmbeddedFamily{.arch = "pangu-embedded",
                                  .neox_rope = true,
                                  .make = make_model<CopyModel>,
                                  .read_hparams = read_rms,
                                  .tensors = tensors_of<CopyWeights>};
const Family kPlamoFamily{.arch = "plamo",
                          .neox_rope = true,
                          .make = make_model<CopyModel>,
                          .read_hparams = read_rms,
                          .tensors = tensors_of<CopyWeights>,
                          .fixed_head_dim = true};

}  // namespace cortiq
