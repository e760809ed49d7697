// Microsoft's Phi-3 / Phi-3.5 / Phi-4 (`phi3`): a pre-norm decoder with RMS
// norms, a fused Q/K/V projection, NeoX RoPE (partial on Phi-4-mini) with
// LongRoPE factors on the 128K models, and a SwiGLU whose gate and up
// projections are one matrix:
//
//   x = token_embd[token]
//   for each layer:
//     x += attention(rms_norm(x) * attn_norm)     q, k, v = attn_qkv(h);
//                                                 q *= 1/sqrt(head_dim) after RoPE
//     x += down(silu(g) * u),  [g | u] = ffn_up(rms_norm(x) * ffn_norm)
//   logits = output(rms_norm(x) * output_norm)    output = token_embd if tied
//
// LongRoPE: rope_factors_long / rope_factors_short (one pair for the
// model) divide the frequencies; llama.cpp takes the long ones when its
// context per sequence exceeds rope.scaling.original_context_length, so
// Cortiq decides by the context it loads the model with (LoadOptions::
// context; llama.cpp rounds its context up to a multiple of 256 first, so
// the two differ only for a context within 256 below an original length
// that is not such a multiple). The converter's magnitude correction is
// rope.scaling.attn_factor.
// attention.sliding_window is read and, as in llama.cpp (which disabled
// Phi's windows), has no effect: every layer attends to every position.
// llama.cpp reads no output bias and no FFN scales for phi3.
//
// Phi-3.5-MoE (`phimoe`) runs the same graph with a mixture of experts for
// the FFN (softmax router, the chosen two renormalized, SwiGLU experts n_ff
// wide) and biases: every norm is llama.cpp's RMS norm plus a bias (the
// model's own are layer norms; llama.cpp's graph, which the goldens follow,
// runs them as RMS norms), attn_output and output carry a bias, the output
// matrix is its own. Q/K/V come apart (with optional biases) or fused.
#include <cmath>
#include <memory>

#include "formats/gguf/gguf_file.hpp"
#include "kernels/cpu/activations.hpp"
#include "model/arch/arch.hpp"
#include "model/arch/family_support.hpp"
#include "model/blocks/attention.hpp"
#include "model/blocks/embedding.hpp"
#include "model/blocks/ffn.hpp"
#include "model/blocks/moe.hpp"
#include "model/blocks/norm.hpp"
#include "model/decoder_model.hpp"
#include "model/gen_model/arch_spec.hpp"
#include "model/rope_setup.hpp"
#include "model/weights.hpp"

namespace cortiq {

namespace {

struct Phi3Layer {
  Norm attn_norm;
  AttentionWeights attn;
  Norm ffn_norm;
  FfnWeights ffn;  // phi3
  MoeWeights moe;  // phimoe
};

bool is_phimoe(const ModelHParams& hp) {
  return hp.arch == "phimoe";
}

struct Phi3Weights {
  TokenEmbedding embedding;
  OutputHead head;
  RopeTables rope;
  std::vector<Phi3Layer> layers;

  void visit(TensorVisitor& v, const ModelHParams& hp) {
    const bool moe = is_phimoe(hp);
    const NormKind norm_kind = moe ? NormKind::rms_with_bias : NormKind::rms;
    embedding.visit(v, hp);
    if (moe) {
      head.visit(v, hp, embedding, OutputMatrix::own, OutputBias::required, norm_kind);
    } else {
      head.visit(v, hp, embedding);
    }
    rope.visit_longrope(v, hp, moe ? hp.head_dim_k / 2 : 0);
    for (int64_t il = 0; il < hp.n_layer; ++il) {
      Phi3Layer& layer = layers.emplace_back();
      layer.attn_norm.visit(v, layer_tensor_name(il, "attn_norm"), hp.n_embd, norm_kind,
                            hp.rms_eps);
      layer.attn.visit(v, hp, il,
                       moe ? AttentionTensors{.output_bias = AttnOutputBias::required}
                           : AttentionTensors{.fused_qkv_written = true});
      layer.ffn_norm.visit(v, layer_tensor_name(il, "ffn_norm"), hp.n_embd, norm_kind, hp.rms_eps);
      if (moe) {
        layer.moe.visit(v, hp, il, {});
      } else {
        layer.ffn.visit(v, hp, il, {.scales_applied = false, .fused_gate_up = true});
      }
    }
  }
};

class Phi3Model final : public FamilyModel<Phi3Weights> {
 public:
  using FamilyModel::FamilyModel;

 private:
  void run_layers(std::span<const BatchRow> rows, std::span<const int32_t> cells, KvCache& cache,
                  ForwardContext& ctx, std::span<float> logits) const override {
    const auto& h = hparams_;
    const auto n = rows.size();
    const auto [x, normed, branch, pass] = start_layers(h, rows, cells, ctx, w_.embedding, w_.rope);
    for (const int64_t il : ctx.stage.layers()) {
      const Phi3Layer& layer = w_.layers[static_cast<size_t>(il)];
      layer.attn_norm.apply(ctx, x, normed);
      attention(layer.attn, h, il, pass, cache, ctx, normed, branch);
      ctx.backend.add(x, branch);
      layer.ffn_norm.apply(ctx, x, normed);
      if (h.n_expert > 0) {
        moe_ffn(layer.moe, h, il, static_cast<int64_t>(n), ctx, normed, branch);
      } else {
        ffn(layer.ffn, FfnActivation::swiglu, h, il, static_cast<int64_t>(n), ctx, normed, branch);
      }
      ctx.backend.add(x, branch);
    }
    w_.head.apply(h, rows, x, ctx, logits);
  }
};

void read_phi3(const HParamReader& keys, ModelHParams& hp) {
  // Required, as in llama.cpp.
  keys.require("attention.layer_norm_rms_epsilon");
  if (hp.head_dim_k != hp.head_dim_v) keys.invalid("key and value heads must be as wide");
  if (is_phimoe(hp)) {
    read_expert_hparams(keys, hp, /*width_key=*/false, /*shared_expert=*/false);
    hp.router.normalize = true;
  } else {
    // Read for the record; llama.cpp runs Phi without windows.
    (void)keys.uint_or("attention.sliding_window", 0);
  }
  // The queries are scaled by 1/sqrt(head size) after RoPE, whatever
  // attention.scale says.
  hp.attention_scale = 0.0f;
  hp.scale_queries = true;
}

// What the converter of a 128K model writes: the original context (here
// shorter than the context the goldens run with, so the long factors
// apply), LongRoPE's attention factor, a window (2047 on Phi-3-mini; here
// shorter than the golden sequences, to show it changes nothing), and a
// partial rotary dimension (Phi-4-mini rotates 3/4 of each head). No
// window for phimoe, whose loader reads none.
void write_phi_keys(const ModelGeometry& g, std::string_view arch,
                    std::vector<gguf::KeyValue>& keys) {
  const std::string p = std::string(arch) + ".";
  // llama.cpp's vocabulary loader gives a model named "phi3" Phi-3's token
  // attributes, failing on a vocabulary without <|endoftext|> (the built-in one).
  keys.push_back({"general.name", gguf::Value(std::string("cortiq-random-p3"))});
  const int64_t orig = std::max<int64_t>(g.n_ctx / 4, 1);
  keys.push_back({p + "rope.scaling.original_context_length", u32_value(orig)});
  const double scale = static_cast<double>(g.n_ctx) / static_cast<double>(orig);
  const double attn_factor =
      orig > 1 && scale > 1.0
          ? std::sqrt(1.0 + std::log(scale) / std::log(static_cast<double>(orig)))
          : 1.0;
  keys.push_back({p + "rope.scaling.attn_factor", gguf::Value(static_cast<float>(attn_factor))});
  if (arch == "phi3") {
    keys.push_back({p + "attention.sliding_window", u32_value(std::min<int64_t>(g.n_ctx, 16))});
  }
  int64_t rot = (g.resolved_head_dim() * 3 / 4) & ~int64_t{1};
  if (rot == 0) rot = g.resolved_head_dim();
  for (gguf::KeyValue& kv : keys) {
    if (kv.key == p + "rope.dimension_count") kv.value = u32_value(rot);
  }
}

void write_phi3(const ModelGeometry& g, std::vector<gguf::KeyValue>& keys) {
  write_phi_keys(g, "phi3", keys);
}

// Phi-3.5-MoE's routing in small: four experts, two per token.
void write_phimoe(const ModelGeometry& g, std::vector<gguf::KeyValue>& keys) {
  write_phi_keys(g, "phimoe", keys);
  write_expert_counts(g, "phimoe", keys);
}

}  // namespace

// llama.cpp shapes attn_output [n_embd, n_embd]: heads must tile n_embd.
const Family kPhi3Family{.arch = "phi3",
                         .neox_rope = true,
                         .make = make_model<Phi3Model>,
                         .read_hparams = read_phi3,
                         .tensors = tensors_of<Phi3Weights>,
                         .write_hparams = write_phi3,
                         .fixed_head_dim = true};

const Family kPhiMoeFamily{.arch = "phimoe",
                           .neox_rope = true,
                           .make = make_model<Phi3Model>,
                           .read_hparams = read_phi3,
                           .tensors = tensors_of<Phi3Weights>,
                           .write_hparams = write_phimoe,
                           .fixed_head_dim = true};

}  // namespace cortiq
