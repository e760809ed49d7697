// Preferred Networks' PLaMo-2 (`plamo2`: PLaMo 2 1B, 2B, 8B): Mamba layers
// (blocks/plamo2_mamba.hpp) between attention layers, each mixer and FFN
// wrapped in a norm before and after:
//
//   x = token_embd[token]
//   for each layer:
//     h  = rms_norm(x) * attn_norm
//     x += rms_norm(head_count_kv[layer] == 0 ? plamo2_mamba(h) : attention(h))
//            * post_attention_norm        attention: fused Q/K/V, each head's
//                                         Q and K RMS-normed with its own
//                                         weights, NeoX RoPE, scores by
//                                         1/sqrt(value head size)
//     x += rms_norm(down(swiglu(up(rms_norm(x) * ffn_norm)))) * post_ffw_norm
//                                         up: gate and up in one [2 n_ff]
//   logits = output(rms_norm(x) * output_norm)    output = token_embd if absent
//
// As llama.cpp's graph, the fused Q/K/V's and the FFN's scales are read and
// not applied. The post-norms carry no ".weight" in their names.
#include <cmath>
#include <memory>

#include "kernels/cpu/activations.hpp"
#include "model/arch/arch.hpp"
#include "model/arch/family_support.hpp"
#include "model/blocks/attention.hpp"
#include "model/blocks/embedding.hpp"
#include "model/blocks/ffn.hpp"
#include "model/blocks/mamba2.hpp"
#include "model/blocks/plamo2_mamba.hpp"
#include "model/decoder_model.hpp"
#include "model/gen_model/arch_spec.hpp"
#include "model/rope_setup.hpp"
#include "model/weights.hpp"

namespace cortiq {

namespace {

struct Plamo2Layer {
  std::vector<float> attn_norm, post_attn_norm, ffn_norm, post_ffn_norm;
  Plamo2MambaWeights ssm;  // layers without KV heads
  AttentionWeights attn;   // the others
  FfnWeights ffn;
};

struct Plamo2Weights {
  TokenEmbedding embedding;
  OutputHead head;
  RopeTables rope;
  std::vector<Plamo2Layer> layers;

  // As llama.cpp's plamo2 loader.
  void visit(TensorVisitor& v, const ModelHParams& hp) {
    embedding.visit(v, hp);
    head.visit(v, hp, embedding, OutputMatrix::own_or_tied);
    for (int64_t il = 0; il < hp.n_layer; ++il) {
      const auto name = [&](std::string_view what) { return layer_tensor_name(il, what); };
      Plamo2Layer& layer = layers.emplace_back();
      v.vector(layer.attn_norm, name("attn_norm.weight"), hp.n_embd, TensorKind::norm);
      if (hp.layer(il).is_recurrent()) {
        layer.ssm.visit(v, hp, il);
      } else {
        layer.attn.visit(v, hp, il,
                         {.qkv = QkvForm::fused,
                          .qkv_effect = QkvEffect::none,
                          .qk_norm = QkNorm::required,
                          .qk_norm_shape = QkNormShape::rms_per_head});
      }
      v.vector(layer.post_attn_norm, name("post_attention_norm"), hp.n_embd, TensorKind::norm);
      v.vector(layer.ffn_norm, name("ffn_norm.weight"), hp.n_embd, TensorKind::norm);
      layer.ffn.visit(v, hp, il, {.scales_applied = false, .fused_gate_up = true});
      v.vector(layer.post_ffn_norm, name("post_ffw_norm"), hp.n_embd, TensorKind::norm);
    }
  }
};

class Plamo2Model final : public FamilyModel<Plamo2Weights> {
 public:
  using FamilyModel::FamilyModel;

 private:
  void run_layers(std::span<const BatchRow> rows, std::span<const int32_t> cells, KvCache& cache,
                  ForwardContext& ctx, std::span<float> logits) const override {
    const auto& h = hparams_;
    const auto n = static_cast<int64_t>(rows.size());
    const LayerStream s = start_layers(h, rows, cells, ctx, w_.embedding, w_.rope);
    const auto branch = s.branch.first(s.x.size());
    for (const int64_t il : ctx.stage.layers()) {
      const Plamo2Layer& layer = w_.layers[static_cast<size_t>(il)];
      rms_norm(ctx, h, s.x, layer.attn_norm, s.normed);
      if (h.layer(il).is_recurrent()) {
        plamo2_mamba(layer.ssm, h, il, rows, cache, ctx, s.normed, s.branch);
      } else {
        attention(layer.attn, h, il, s.pass, cache, ctx, s.normed, s.branch);
      }
      rms_norm(ctx, h, branch, layer.post_attn_norm, branch);
      ctx.backend.add(s.x, branch);
      rms_norm(ctx, h, s.x, layer.ffn_norm, s.normed);
      ffn(layer.ffn, FfnActivation::swiglu, h, il, n, ctx, s.normed, s.branch);
      rms_norm(ctx, h, branch, layer.post_ffn_norm, branch);
      ctx.backend.add(s.x, branch);
    }
    w_.head.apply(h, rows, s.x, ctx, logits);
  }
};

void read_plamo2(const HParamReader& keys, ModelHParams& hp) {
  keys.require("attention.layer_norm_rms_epsilon");
  read_ssm_hparams(keys, hp, SsmGroups::none);
  if (hp.head_dim_v > 0) {
    hp.attention_scale = 1.0f / std::sqrt(static_cast<float>(hp.head_dim_v));
  }
  for (LayerSpec& layer : hp.layers) {
    if (layer.n_head_kv != 0) continue;
    layer.rope = RopeSlot::none;
    layer.state_width = plamo2_mamba_state_width(hp);
    layer.recurrent = RecurrentKind::mamba2;
  }
}

// PLaMo 2's shape in small: Mamba layers but every third and the last,
// heads of 64 over an inner width of 2 n_embd, a state of 64 (as PLaMo 2's), 4 taps.
void write_plamo2(const ModelGeometry& g, std::vector<gguf::KeyValue>& keys) {
  const std::string p = "plamo2.";
  write_u32_per_layer(
      p + "attention.head_count_kv", g.n_layer,
      [&](int64_t il) { return attends_in_small(g, il) ? g.n_head_kv : 0; }, keys);
  keys.push_back({p + "ssm.conv_kernel", u32_value(4)});
  keys.push_back({p + "ssm.inner_size", u32_value(2 * g.n_embd)});
  keys.push_back({p + "ssm.state_size", u32_value(64)});
  keys.push_back({p + "ssm.time_step_rank", u32_value(std::max<int64_t>(1, 2 * g.n_embd / 64))});
  keys.push_back({p + "ssm.group_count", u32_value(0)});
}

}  // namespace

const Family kPlamo2Family{.arch = "plamo2",
                           .neox_rope = true,
                           .make = make_model<Plamo2Model>,
                           .read_hparams = read_plamo2,
                           .tensors = tensors_of<Plamo2Weights>,
                           .write_hparams = write_plamo2,
                           .layers_may_lack_parts = true};

}  // namespace cortiq
