// AI21's Jamba (`jamba`: Jamba v0.1, Jamba 1.5 Mini / Large, Jamba Reasoning
// 3B): Mamba layers (blocks/mamba.hpp, with RMS norms of dt, B and C)
// between unrotated attention layers, each followed by a SwiGLU FFN or a
// mixture of experts:
//
//   x = token_embd[token]
//   for each layer:
//     h  = rms_norm(x) * attn_norm
//     x += head_count_kv[layer] == 0 ? mamba(h)
//                                    : attention(h)   no RoPE, scores by
//                                                     1/sqrt(head size)
//     h  = rms_norm(x) * ffn_norm
//     x += the layer has ffn_gate_inp ? moe(h)    softmax routing, not
//                                                 renormalized, experts n_ff wide
//                                     : down(silu(gate(h)) * up(h))
//   logits = output(rms_norm(x) * output_norm)    output = token_embd if absent
//
// Which layers have experts is the file's to say (llama.cpp reads the router
// as optional; Jamba's converter writes one every second layer).
#include <memory>

#include "formats/gguf/gguf_file.hpp"
#include "kernels/cpu/activations.hpp"
#include "model/arch/arch.hpp"
#include "model/arch/family_support.hpp"
#include "model/blocks/attention.hpp"
#include "model/blocks/embedding.hpp"
#include "model/blocks/ffn.hpp"
#include "model/blocks/mamba.hpp"
#include "model/blocks/moe.hpp"
#include "model/decoder_model.hpp"
#include "model/gen_model/arch_spec.hpp"
#include "model/rope_setup.hpp"
#include "model/weights.hpp"

namespace cortiq {

namespace {

// gen-model's layers with experts (the file decides when loading).
bool experts_written(int64_t il) {
  return il % 2 == 1;
}

struct JambaLayer {
  std::vector<float> attn_norm, ffn_norm;
  MambaWeights ssm;       // layers without KV heads
  AttentionWeights attn;  // the others
  FfnWeights ffn;         // or, with a router:
  MoeWeights moe;
};

struct JambaWeights {
  TokenEmbedding embedding;
  OutputHead head;
  RopeTables rope;  // none used
  std::vector<JambaLayer> layers;

  // As llama.cpp's jamba loader.
  void visit(TensorVisitor& v, const ModelHParams& hp) {
    embedding.visit(v, hp);
    head.visit(v, hp, embedding, OutputMatrix::own_or_tied);
    for (int64_t il = 0; il < hp.n_layer; ++il) {
      const auto name = [&](std::string_view what) { return layer_tensor_name(il, what); };
      JambaLayer& layer = layers.emplace_back();
      v.vector(layer.attn_norm, name("attn_norm.weight"), hp.n_embd, TensorKind::norm);
      if (hp.layer(il).is_recurrent()) {
        layer.ssm.visit(v, hp, il, /*bcdt_norms=*/true);
      } else {
        layer.attn.visit(v, hp, il, {});
      }
      v.vector(layer.ffn_norm, name("ffn_norm.weight"), hp.n_embd, TensorKind::norm);
      if (hp.layer_has_experts(il)) {
        layer.moe.visit(v, hp, il, {});
      } else {
        layer.ffn.visit(v, hp, il, {.scales_applied = false});
      }
    }
  }
};

class JambaModel final : public FamilyModel<JambaWeights> {
 public:
  using FamilyModel::FamilyModel;

 private:
  void run_layers(std::span<const BatchRow> rows, std::span<const int32_t> cells, KvCache& cache,
                  ForwardContext& ctx, std::span<float> logits) const override {
    const auto& h = hparams_;
    const auto n = static_cast<int64_t>(rows.size());
    const LayerStream s = start_layers(h, rows, cells, ctx, w_.embedding, w_.rope);
    for (const int64_t il : ctx.stage.layers()) {
      const JambaLayer& layer = w_.layers[static_cast<size_t>(il)];
      rms_norm(ctx, h, s.x, layer.attn_norm, s.normed);
      if (h.layer(il).is_recurrent()) {
        mamba(layer.ssm, h, il, rows, cache, ctx, s.normed, s.branch);
      } else {
        attention(layer.attn, h, il, s.pass, cache, ctx, s.normed, s.branch);
      }
      ctx.backend.add(s.x, s.branch);
      rms_norm(ctx, h, s.x, layer.ffn_norm, s.normed);
      if (h.layer_has_experts(il)) {
        moe_ffn(layer.moe, h, il, n, ctx, s.normed, s.branch);
      } else {
        ffn(layer.ffn, FfnActivation::swiglu, h, il, n, ctx, s.normed, s.branch);
      }
      ctx.backend.add(s.x, s.branch);
    }
    w_.head.apply(h, rows, s.x, ctx, logits);
  }
};

// The attention's shapes as llama.cpp's loader has them (queries and output
// n_embd wide), its scale fixed at 1/sqrt(head size); experts, when the
// file counts any, n_ff wide with softmax routing as is.
void read_jamba(const HParamReader& keys, ModelHParams& hp) {
  keys.require("attention.layer_norm_rms_epsilon");
  read_mamba_hparams(keys, hp);
  hp.attention_scale = 0.0f;
  if (hp.head_dim_k != hp.head_dim_v) keys.invalid("key and value heads must be as wide");
  for (LayerSpec& layer : hp.layers) {
    layer.rope = RopeSlot::none;
    if (layer.n_head_kv == 0) {
      layer.state_width = mamba_state_width(hp);
      layer.recurrent = RecurrentKind::mamba;
    } else if (layer.q_width() != hp.n_embd) {
      keys.invalid("an attention layer's query heads must span embedding_length");
    }
  }
  if (keys.uint_or("expert_count", 0) > 0) {
    read_expert_hparams(keys, hp, /*width_key=*/false, /*shared_expert=*/false);
  }
  // The layers whose router the file has (gen-model's parse of its own
  // keys, without tensors: the layers it writes them for).
  const gguf::GgufFile& file = keys.file();
  for (int64_t il = 0; il < hp.n_layer; ++il) {
    hp.experts_in_layer.push_back(
        file.tensors().empty()
            ? experts_written(il)
            : file.find_tensor(layer_tensor_name(il, "ffn_gate_inp.weight")) != nullptr);
  }
}

// Jamba's shape in small: Mamba layers but every third and the last (Jamba:
// one attention layer in eight), experts (four, two per token) every second
// layer.
void write_jamba(const ModelGeometry& g, std::vector<gguf::KeyValue>& keys) {
  write_u32_per_layer(
      "jamba.attention.head_count_kv", g.n_layer,
      [&](int64_t il) { return attends_in_small(g, il) ? g.n_head_kv : 0; }, keys);
  write_mamba_keys(g, "jamba", keys);
  write_expert_counts(g, "jamba", keys);
}

}  // namespace

const Family kJambaFamily{.arch = "jamba",
                          .make = make_model<JambaModel>,
                          .read_hparams = read_jamba,
                          .tensors = tensors_of<JambaWeights>,
                          .write_hparams = write_jamba,
                          .layers_may_lack_parts = true};

}  // namespace cortiq
