// Cohere's Command R / R+ (`command-r`) and Command R7B / Command A
// (`cohere2`): the attention and the SwiGLU feed-forward both read one layer
// norm (weight, no bias) of the residual stream ("parallel residual"); RoPE
// on adjacent pairs; the output tied to the embedding and the logits scaled:
//
//   x = token_embd[token]
//   for each layer:
//     h = layer_norm(x) * attn_norm
//     x = (down(silu(gate(h)) * up(h)) + x) + attention(h)
//              command-r with 64+ layers (R+): q, k = per-head layer norms
//              (attn_{q,k}_norm, a weight row per head) before RoPE
//   logits = token_embd(layer_norm(x) * output_norm) * logit_scale
//
// cohere2: three sliding-window layers (attention.sliding_window) per
// global one (attention.sliding_window_pattern, 4); RoPE only in the window
// layers, at the model's base (llama.cpp's graph never uses
// rope.freq_base_swa); the global layers use no positions at all. Its FFN
// applies the per-tensor scales; command-r's does not.
// llama.cpp scales the scores by 1/sqrt(head size) whatever
// attention.scale says and shapes the attention output [n_embd, n_embd].
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

struct CommandRLayer {
  Norm attn_norm;
  AttentionWeights attn;
  FfnWeights ffn;
};

struct CommandRWeights {
  TokenEmbedding embedding;
  OutputHead head;
  RopeTables rope;
  std::vector<CommandRLayer> layers;

  void visit(TensorVisitor& v, const ModelHParams& hp) {
    const bool cohere2 = hp.arch == "cohere2";
    embedding.visit(v, hp);
    head.visit(v, hp, embedding, OutputMatrix::always_tied, OutputBias::none,
               NormKind::layer_no_bias);
    // Command R+ (64 layers and more) has per-head Q/K norms, always.
    const QkNorm qk_norm = !cohere2 && hp.n_layer >= 64 ? QkNorm::required : QkNorm::none;
    for (int64_t il = 0; il < hp.n_layer; ++il) {
      CommandRLayer& layer = layers.emplace_back();
      layer.attn_norm.visit(v, layer_tensor_name(il, "attn_norm"), hp.n_embd,
                            NormKind::layer_no_bias, hp.norm_eps);
      layer.attn.visit(v, hp, il,
                       {.qk_norm = qk_norm, .qk_norm_shape = QkNormShape::layer_per_head});
      layer.ffn.visit(v, hp, il, {.scales_applied = cohere2});
    }
  }
};

class CommandRModel final : public FamilyModel<CommandRWeights> {
 public:
  using FamilyModel::FamilyModel;

 private:
  void run_layers(std::span<const BatchRow> rows, std::span<const int32_t> cells, KvCache& cache,
                  ForwardContext& ctx, std::span<float> logits) const override {
    const auto& h = hparams_;
    const auto n = static_cast<int64_t>(rows.size());
    const auto [x, normed, branch, pass] = start_layers(h, rows, cells, ctx, w_.embedding, w_.rope);
    const Tensor ffn_out = ctx.backend.scratch(ctx.buffers.parallel, x.size());
    for (const int64_t il : ctx.stage.layers()) {
      const CommandRLayer& layer = w_.layers[static_cast<size_t>(il)];
      layer.attn_norm.apply(ctx, x, normed);
      attention(layer.attn, h, il, pass, cache, ctx, normed, branch);
      ffn(layer.ffn, FfnActivation::swiglu, h, il, n, ctx, normed, ffn_out);
      // llama.cpp's order: (ffn + x) + attention.
      ctx.backend.add(x, ffn_out);
      ctx.backend.add(x, branch);
    }
    w_.head.apply(h, rows, x, ctx, logits);
  }
};

void read_common(const HParamReader& keys, ModelHParams& hp) {
  // Required, as in llama.cpp.
  if (!keys.has("attention.layer_norm_epsilon")) {
    keys.invalid("missing key " + keys.key("attention.layer_norm_epsilon"));
  }
  hp.norm_eps = keys.float_or("attention.layer_norm_epsilon", 0.0f);
  hp.uses_rms_norm = false;
  if (!(hp.norm_eps > 0.0f)) keys.invalid("attention.layer_norm_epsilon must be positive");
  if (hp.head_dim_k != hp.head_dim_v) keys.invalid("key and value heads must be as wide");
  hp.attention_scale = 0.0f;
}

void read_command_r(const HParamReader& keys, ModelHParams& hp) {
  read_common(keys, hp);
  // Multiplies the logits; absent (0): no scaling.
  hp.logit_scale = keys.float_or("logit_scale", 0.0f);
}

void read_cohere2(const HParamReader& keys, ModelHParams& hp) {
  read_common(keys, hp);
  for (const char* key : {"attention.sliding_window", "logit_scale"}) {
    if (!keys.has(key)) keys.invalid("missing key " + keys.key(key));
  }
  hp.logit_scale = keys.float_or("logit_scale", 0.0f);
  hp.sliding_window = keys.uint_or("attention.sliding_window", 0);
  // Window layers rotate with the model's table; global layers use none.
  set_sliding_window_pattern(hp, hp.sliding_window,
                             keys.uint_or("attention.sliding_window_pattern", 4), RopeSlot::global);
  for (LayerSpec& layer : hp.layers) {
    if (layer.window == 0) layer.rope = RopeSlot::none;
  }
}

// The converters' keys: the layer norm epsilon and the logit scale
// (Command R: 0.0625; Command R7B: 0.25); cohere2's window, here shorter
// than the golden sequences, and its pattern (a global layer every 4; two
// layers hold one of each with pattern 2).
void write_common(const ModelGeometry& g, const std::string& p, float logit_scale,
                  std::vector<gguf::KeyValue>& keys) {
  keys.push_back({p + "attention.layer_norm_epsilon", gguf::Value(static_cast<float>(g.rms_eps))});
  keys.push_back({p + "logit_scale", gguf::Value(logit_scale)});
}

void write_command_r(const ModelGeometry& g, std::vector<gguf::KeyValue>& keys) {
  write_common(g, "command-r.", 0.0625f, keys);
}

void write_cohere2(const ModelGeometry& g, std::vector<gguf::KeyValue>& keys) {
  const std::string p = "cohere2.";
  write_common(g, p, 0.25f, keys);
  keys.push_back({p + "attention.sliding_window", u32_value(g.resolved_sliding_window())});
  keys.push_back({p + "attention.sliding_window_pattern", u32_value(g.n_layer >= 4 ? 4 : 2)});
}

}  // namespace

const Family kCommandRFamily{.arch = "command-r",
                             .neox_rope = false,
                             .make = make_model<CommandRModel>,
                             .read_hparams = read_command_r,
                             .tensors = tensors_of<CommandRWeights>,
                             .write_hparams = write_command_r,
                             .fixed_head_dim = true};
const Family kCohere2Family{.arch = "cohere2",
                            .neox_rope = false,
                            .make = make_model<CommandRModel>,
                            .read_hparams = read_cohere2,
                            .tensors = tensors_of<CommandRWeights>,
                            .write_hparams = write_cohere2,
                            .fixed_head_dim = true};

}  // namespace cortiq
