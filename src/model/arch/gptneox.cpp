// EleutherAI's GPT-NeoX (`gptneox`: GPT-NeoX-20B, Pythia, ...): layer
// norms, one fused Q/K/V projection, NeoX RoPE over part of each head
// (rope.dimension_count, Pythia's rotary_pct 0.25), biases everywhere, an
// ungated GELU feed-forward, and the two branches in parallel or in sequence
// (use_parallel_residual):
//
//   x = token_embd[token]
//   for each layer:
//     a = attention(layer_norm(x) * attn_norm + attn_norm_b)
//           Q/K/V from attn_qkv + attn_qkv_b; output bias
//     parallel:   x = (ffn(layer_norm(x) * ffn_norm + ffn_norm_b) + x) + a
//     sequential: x += a;  x += ffn(layer_norm(x) * ffn_norm + ffn_norm_b)
//       ffn(h) = down(gelu(up(h) + up_b)) + down_b
//   logits = output(layer_norm(x) * output_norm + output_norm_b)
//
// llama.cpp requires every tensor (output.weight included), reads
// use_parallel_residual without a default, shapes the attention output
// [n_embd, n_embd] (heads tile n_embd), scales the scores by 1/sqrt(head
// size) whatever attention.scale says and applies no FFN scale.
#include <algorithm>
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

struct GptNeoXLayer {
  Norm attn_norm;
  AttentionWeights attn;
  Norm ffn_norm;
  FfnWeights ffn;
};

struct GptNeoXWeights {
  TokenEmbedding embedding;
  OutputHead head;
  RopeTables rope;
  std::vector<GptNeoXLayer> layers;

  void visit(TensorVisitor& v, const ModelHParams& hp) {
    embedding.visit(v, hp);
    head.visit(v, hp, embedding, OutputMatrix::own, OutputBias::none, NormKind::layer);
    for (int64_t il = 0; il < hp.n_layer; ++il) {
      GptNeoXLayer& layer = layers.emplace_back();
      layer.attn_norm.visit(v, layer_tensor_name(il, "attn_norm"), hp.n_embd, NormKind::layer,
                            hp.norm_eps);
      layer.attn.visit(v, hp, il,
                       {.qkv = QkvForm::fused,
                        .fused_qkv_bias = FusedQkvBias::required,
                        .fused_qkv_written = true,
                        .output_bias = AttnOutputBias::required});
      layer.ffn_norm.visit(v, layer_tensor_name(il, "ffn_norm"), hp.n_embd, NormKind::layer,
                           hp.norm_eps);
      layer.ffn.visit(v, hp, il,
                      {.gated = false, .biases_required = true, .scales_applied = false});
    }
  }
};

class GptNeoXModel final : public DecoderModel {
 public:
  GptNeoXModel(ModelHParams hp, WeightBinder& binder) : DecoderModel(std::move(hp), binder) {
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
      const GptNeoXLayer& layer = w_.layers[static_cast<size_t>(il)];
      layer.attn_norm.apply(ctx, x, normed);
      attention(layer.attn, h, il, pass, cache, ctx, normed, branch);
      if (parallel_) {
        layer.ffn_norm.apply(ctx, x, normed);
        // The attention's scratch (attn_out, [rows][n_embd] here) is free
        // again: it takes the FFN's output while `branch` keeps the attention's.
        const Tensor ffn_out =
            ctx.backend.scratch(ctx.buffers.attn_out, n * static_cast<size_t>(h.n_embd));
        ffn(layer.ffn, FfnActivation::gelu, h, il, static_cast<int64_t>(n), ctx, normed, ffn_out);
        // llama.cpp's order: (ffn + x) + attention.
        ctx.backend.add(x, ffn_out);
        ctx.backend.add(x, branch);
      } else {
        ctx.backend.add(x, branch);
        layer.ffn_norm.apply(ctx, x, normed);
        ffn(layer.ffn, FfnActivation::gelu, h, il, static_cast<int64_t>(n), ctx, normed, branch);
        ctx.backend.add(x, branch);
      }
    }
    w_.head.apply(h, rows, x, ctx, logits);
  }

  GptNeoXWeights w_;
  bool parallel_ = hparams_.parallel_residual;
};

void read_gptneox(const HParamReader& keys, ModelHParams& hp) {
  // Both required, as in llama.cpp.
  for (const char* key : {"attention.layer_norm_epsilon", "use_parallel_residual"}) {
    if (!keys.has(key)) keys.invalid("missing key " + keys.key(key));
  }
  hp.norm_eps = keys.float_or("attention.layer_norm_epsilon", 0.0f);
  hp.uses_rms_norm = false;
  if (!(hp.norm_eps > 0.0f)) keys.invalid("attention.layer_norm_epsilon must be positive");
  if (hp.head_dim_v != hp.head_dim_k) keys.invalid("gptneox needs key_length = value_length");
  hp.parallel_residual = keys.bool_or("use_parallel_residual", true);
  hp.attention_scale = 0.0f;
}

// Pythia's rotary_pct 0.25 (of the head, even) and its parallel residual.
void write_gptneox(const ModelGeometry& g, std::vector<gguf::KeyValue>& keys) {
  keys.push_back(
      {"gptneox.attention.layer_norm_epsilon", gguf::Value(static_cast<float>(g.rms_eps))});
  keys.push_back({"gptneox.use_parallel_residual", gguf::Value(true)});
  const int64_t rotary = std::max<int64_t>(2, g.resolved_head_dim() / 4 / 2 * 2);
  for (gguf::KeyValue& kv : keys) {
    if (kv.key == "gptneox.rope.dimension_count") {
      kv.value = u32_value(rotary);
    }
  }
}

}  // namespace

const Family kGptNeoXFamily{.arch = "gptneox",
                            .neox_rope = true,
                            .make = make_model<GptNeoXModel>,
                            .read_hparams = read_gptneox,
                            .tensors = tensors_of<GptNeoXWeights>,
                            .write_hparams = write_gptneox,
                            .fixed_head_dim = true};

}  // namespace cortiq
