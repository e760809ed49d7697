// Alibaba's Qwen (`qwen`: Qwen-1.8B/7B/14B/72B, the first generation): a
// pre-norm decoder with RMS norms, one fused Q/K/V projection with its
// bias, NeoX RoPE and SwiGLU:
//
//   x = token_embd[token]
//   for each layer:
//     x += attention(rms_norm(x) * attn_norm)    q|k|v = h attn_qkv + attn_qkv_b
//     x += down(silu(gate(h)) * up(h)),  h = rms_norm(x) * ffn_norm
//   logits = output(rms_norm(x) * output_norm)   output.weight always its own
//
// The converter writes feed_forward_length as the checkpoint's
// intermediate_size, twice the width of each FFN matrix: llama.cpp shapes
// them n_ff / 2. attn_qkv is [n_embd, 3 n_embd] (every head has its own K
// and V); attn_output [n_embd, n_embd]. The scores are scaled by 1/sqrt(head
// size) whatever attention.scale says; no FFN scale is applied (build_ffn
// gets NULL for them).
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

struct QwenLayer {
  Norm attn_norm;
  AttentionWeights attn;
  Norm ffn_norm;
  FfnWeights ffn;
};

struct QwenWeights {
  TokenEmbedding embedding;
  OutputHead head;
  RopeTables rope;
  std::vector<QwenLayer> layers;

  // As llama.cpp's load_arch_tensors for qwen, plus its generic per-tensor
  // scales (which the attention and FFN blocks add).
  void visit(TensorVisitor& v, const ModelHParams& hp) {
    embedding.visit(v, hp);
    head.visit(v, hp, embedding, OutputMatrix::own);
    for (int64_t il = 0; il < hp.n_layer; ++il) {
      QwenLayer& layer = layers.emplace_back();
      layer.attn_norm.visit(v, layer_tensor_name(il, "attn_norm"), hp.n_embd, NormKind::rms,
                            hp.rms_eps);
      layer.attn.visit(v, hp, il,
                       {.qkv = QkvForm::fused, .fused_qkv_bias = FusedQkvBias::required});
      layer.ffn_norm.visit(v, layer_tensor_name(il, "ffn_norm"), hp.n_embd, NormKind::rms,
                           hp.rms_eps);
      layer.ffn.visit(v, hp, il, {.scales_applied = false});
    }
  }
};

class QwenModel final : public FamilyModel<QwenWeights> {
 public:
  using FamilyModel::FamilyModel;

 private:
  void run_layers(std::span<const BatchRow> rows, std::span<const int32_t> cells, KvCache& cache,
                  ForwardContext& ctx, std::span<float> logits) const override {
    const auto& h = hparams_;
    const auto n = rows.size();
    const auto [x, normed, branch, pass] = start_layers(h, rows, cells, ctx, w_.embedding, w_.rope);
    for (const int64_t il : ctx.stage.layers()) {
      const QwenLayer& layer = w_.layers[static_cast<size_t>(il)];
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

void read_qwen(const HParamReader& keys, ModelHParams& hp) {
  // llama.cpp's get_key: required.
  keys.require("attention.layer_norm_rms_epsilon");
  // attn_qkv is [n_embd, 3 n_embd]: as many KV heads as heads, tiling n_embd.
  if (hp.head_dim_v != hp.head_dim_k || hp.head_dim_k * hp.n_head != hp.n_embd) {
    keys.invalid("qwen needs heads of n_embd / n_head for keys and values");
  }
  for (LayerSpec& layer : hp.layers) {
    if (layer.n_head != hp.n_head || layer.n_head_kv != layer.n_head) {
      keys.invalid("qwen needs one KV head per head, the same in every layer");
    }
    if (layer.n_ff < 2) keys.invalid("feed_forward_length must be at least 2");
    layer.n_ff /= 2;
  }
  hp.n_ff = hp.layers.front().n_ff;
  hp.attention_scale = 0.0f;
}

// Qwen's converter writes as many KV heads as heads (its checkpoints have
// no grouped-query attention), whatever the geometry asks.
void write_qwen(const ModelGeometry& g, std::vector<gguf::KeyValue>& keys) {
  for (gguf::KeyValue& kv : keys) {
    if (kv.key == "qwen.attention.head_count_kv") {
      kv.value = u32_value(g.n_head);
    }
  }
}

}  // namespace

const Family kQwenFamily{.arch = "qwen",
                         .neox_rope = true,
                         .make = make_model<QwenModel>,
                         .read_hparams = read_qwen,
                         .tensors = tensors_of<QwenWeights>,
                         .write_hparams = write_qwen,
                         .fixed_head_dim = true};

}  // namespace cortiq
