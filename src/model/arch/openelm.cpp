// Apple's OpenELM (`openelm`: OpenELM-270M/450M/1.1B/3B): a pre-norm decoder
// whose layers differ in width — each its own number of query and KV heads
// (one head size) and its own FFN width, the "layer-wise scaling" —, with a
// fused Q/K/V projection, RMS norms on each query and key head before NeoX
// RoPE, SwiGLU, and the token embedding as output matrix:
//
//   x = token_embd[token]
//   for each layer l (heads n_head[l], KV heads n_head_kv[l], FFN n_ff[l]):
//     x += attention(rms_norm(x) * attn_norm)    q|k|v = h attn_qkv (no bias)
//            q, k = rms_norm(q) * attn_q_norm, rms_norm(k) * attn_k_norm per head
//     x += down(silu(gate(h)) * up(h)),  h = rms_norm(x) * ffn_norm
//   logits = token_embd(rms_norm(x) * output_norm)
//
// The converter writes attention.head_count, head_count_kv and
// feed_forward_length as arrays of one number per layer, and splits the
// checkpoint's fused gate/up (proj_1) into ffn_gate and ffn_up. llama.cpp
// reads no output.weight and no attn_qkv.bias, multiplies by attn_qkv
// without its scale (build_lora_mm gets none), scales the scores by
// 1/sqrt(head size) whatever attention.scale says and applies no FFN scale.
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

struct OpenElmLayer {
  Norm attn_norm;
  AttentionWeights attn;
  Norm ffn_norm;
  FfnWeights ffn;
};

struct OpenElmWeights {
  TokenEmbedding embedding;
  OutputHead head;
  RopeTables rope;
  std::vector<OpenElmLayer> layers;

  // As llama.cpp's load_arch_tensors for openelm, plus its generic
  // per-tensor scales (which the attention and FFN blocks add).
  void visit(TensorVisitor& v, const ModelHParams& hp) {
    embedding.visit(v, hp);
    head.visit(v, hp, embedding, OutputMatrix::always_tied);
    for (int64_t il = 0; il < hp.n_layer; ++il) {
      OpenElmLayer& layer = layers.emplace_back();
      layer.attn_norm.visit(v, layer_tensor_name(il, "attn_norm"), hp.n_embd, NormKind::rms,
                            hp.rms_eps);
      layer.attn.visit(
          v, hp, il,
          {.qkv = QkvForm::fused, .qkv_effect = QkvEffect::none, .qk_norm = QkNorm::required});
      layer.ffn_norm.visit(v, layer_tensor_name(il, "ffn_norm"), hp.n_embd, NormKind::rms,
                           hp.rms_eps);
      layer.ffn.visit(v, hp, il, {.scales_applied = false});
    }
  }
};

class OpenElmModel final : public FamilyModel<OpenElmWeights> {
 public:
  using FamilyModel::FamilyModel;

 private:
  void run_layers(std::span<const BatchRow> rows, std::span<const int32_t> cells, KvCache& cache,
                  ForwardContext& ctx, std::span<float> logits) const override {
    const auto& h = hparams_;
    const auto n = rows.size();
    const auto [x, normed, branch, pass] = start_layers(h, rows, cells, ctx, w_.embedding, w_.rope);
    for (const int64_t il : ctx.stage.layers()) {
      const OpenElmLayer& layer = w_.layers[static_cast<size_t>(il)];
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

void read_openelm(const HParamReader& keys, ModelHParams& hp) {
  // llama.cpp's get_key: required.
  keys.require("attention.layer_norm_rms_epsilon");
  if (hp.head_dim_v != hp.head_dim_k) keys.invalid("openelm needs key_length = value_length");
  hp.attention_scale = 0.0f;
}

// OpenELM's layer-wise scaling, as its converter writes it: per-layer head
// counts (every layer the geometry's group size, one KV head more on odd
// layers) and FFN widths (growing by half the geometry's each layer), one
// head size given.
void write_openelm(const ModelGeometry& g, std::vector<gguf::KeyValue>& keys) {
  const auto per_layer = [&](const std::string& key, const std::function<int64_t(int64_t)>& of) {
    write_u32_per_layer("openelm." + key, g.n_layer, of, keys);
  };
  const int64_t group = g.n_head / g.n_head_kv;
  const auto kv_heads = [&](int64_t il) { return g.n_head_kv + il % 2; };
  per_layer("attention.head_count", [&](int64_t il) { return kv_heads(il) * group; });
  per_layer("attention.head_count_kv", kv_heads);
  per_layer("feed_forward_length", [&](int64_t il) { return g.n_ff + il * (g.n_ff / 2); });
  write_head_size(g, kOpenElmFamily, keys, /*always=*/true);
}

}  // namespace

const Family kOpenElmFamily{.arch = "openelm",
                            .neox_rope = true,
                            .make = make_model<OpenElmModel>,
                            .read_hparams = read_openelm,
                            .tensors = tensors_of<OpenElmWeights>,
                            .write_hparams = write_openelm};

}  // namespace cortiq
