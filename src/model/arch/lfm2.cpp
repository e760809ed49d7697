// Liquid AI's LFM2 (`lfm2`: LFM2-350M, 700M, 1.2B, 2.6B): a pre-norm decoder
// whose layers are either gated short convolutions (blocks/short_conv.hpp)
// or attention, each followed by a SwiGLU FFN:
//
//   x = token_embd[token]
//   for each layer:
//     h  = rms_norm(x) * attn_norm                 (the "operator norm")
//     x += head_count_kv[layer] == 0 ? short_conv(h)
//                                    : attention(h)     per-head Q/K RMS
//                                                         norms before NeoX RoPE
//     x += ffn(rms_norm(x) * ffn_norm)
//   logits = output(rms_norm(x) * token_embd_norm)    output = token_embd if absent
//
// A layer with no KV heads is a convolution of shortconv.l_cache taps whose
// state (each channel's last taps - 1 inputs) lives per sequence in the KV
// cache; attention layers cache keys and values as usual and, with
// attention.sliding_window, see that window. Every dense FFN is n_ff wide
// (the first layer's, as llama.cpp sizes them); scores are scaled by
// 1/sqrt(head size); the query heads span n_embd.
//
// LFM2-8B-A1B and 24B-A2B (`lfm2moe`) are the same layers whose FFN, past
// leading_dense_block_count dense ones, is a mixture of experts: the gating
// as the file says (required), the selection bias exp_probs_b (required)
// choosing, the chosen weights renormalized, never scaled; no sliding
// window (llama.cpp's lfm2moe loader reads none).
#include <memory>

#include "kernels/cpu/activations.hpp"
#include "model/arch/arch.hpp"
#include "model/arch/family_support.hpp"
#include "model/blocks/attention.hpp"
#include "model/blocks/embedding.hpp"
#include "model/blocks/ffn.hpp"
#include "model/blocks/moe.hpp"
#include "model/blocks/short_conv.hpp"
#include "model/decoder_model.hpp"
#include "model/gen_model/arch_spec.hpp"
#include "model/rope_setup.hpp"
#include "model/weights.hpp"

namespace cortiq {

namespace {

bool is_conv_layer(const ModelHParams& hp, int64_t il) {
  return hp.layer(il).n_head_kv == 0;
}

struct Lfm2Layer {
  std::vector<float> attn_norm;
  AttentionWeights attn;  // attention layers
  ShortConvWeights conv;  // convolution layers
  std::vector<float> ffn_norm;
  FfnWeights ffn;  // dense layers
  MoeWeights moe;  // lfm2moe's layers past the dense lead
};

struct Lfm2Weights {
  TokenEmbedding embedding;
  OutputHead head;
  RopeTables rope;
  std::vector<Lfm2Layer> layers;

  // As llama.cpp's load_arch_tensors for lfm2.
  void visit(TensorVisitor& v, const ModelHParams& hp) {
    embedding.visit(v, hp);
    head.norm_name = "token_embd_norm";
    head.visit(v, hp, embedding, OutputMatrix::own_or_tied);
    for (int64_t il = 0; il < hp.n_layer; ++il) {
      Lfm2Layer& layer = layers.emplace_back();
      v.vector(layer.ffn_norm, layer_tensor_name(il, "ffn_norm.weight"), hp.n_embd,
               TensorKind::norm);
      if (hp.layer_has_experts(il)) {
        layer.moe.visit(v, hp, il, {.selection_bias_required = true});
      } else {
        layer.ffn.visit(v, hp, il, {.scales_applied = false});
      }
      v.vector(layer.attn_norm, layer_tensor_name(il, "attn_norm.weight"), hp.n_embd,
               TensorKind::norm);
      if (is_conv_layer(hp, il)) {
        layer.conv.visit(v, hp, il);
      } else {
        layer.attn.visit(v, hp, il, {.qk_norm = QkNorm::required});
      }
    }
  }
};

class Lfm2Model final : public FamilyModel<Lfm2Weights> {
 public:
  using FamilyModel::FamilyModel;

 private:
  void run_layers(std::span<const BatchRow> rows, std::span<const int32_t> cells, KvCache& cache,
                  ForwardContext& ctx, std::span<float> logits) const override {
    const auto& h = hparams_;
    const auto n = static_cast<int64_t>(rows.size());
    const LayerStream s = start_layers(h, rows, cells, ctx, w_.embedding, w_.rope);
    for (const int64_t il : ctx.stage.layers()) {
      const Lfm2Layer& layer = w_.layers[static_cast<size_t>(il)];
      rms_norm(ctx, h, s.x, layer.attn_norm, s.normed);
      if (is_conv_layer(h, il)) {
        short_conv(layer.conv, h, il, rows, cache, ctx, s.normed, s.branch);
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

// What lfm2 and lfm2moe read alike; `windowed`: attention.sliding_window too.
void read_lfm2_layers(const HParamReader& keys, ModelHParams& hp, bool windowed) {
  keys.require("attention.layer_norm_rms_epsilon");
  hp.shortconv_taps = keys.required_uint("shortconv.l_cache");
  if (hp.shortconv_taps < 2 || hp.shortconv_taps > 1024) {
    keys.invalid("shortconv.l_cache must be 2 to 1024");
  }
  if (hp.head_dim_k != hp.head_dim_v) keys.invalid("key and value heads must be as wide");
  if (hp.n_ff <= 0) keys.invalid("feed_forward_length must be positive");
  hp.attention_scale = 0.0f;
  hp.sliding_window = windowed ? keys.uint_or("attention.sliding_window", 0) : 0;
  for (int64_t il = 0; il < hp.n_layer; ++il) {
    LayerSpec& layer = hp.layers[static_cast<size_t>(il)];
    layer.n_ff = hp.n_ff;
    if (layer.n_head_kv == 0) {
      layer.state_width = short_conv_state_width(hp);
      layer.recurrent = RecurrentKind::short_conv;
      continue;
    }
    if (layer.q_width() != hp.n_embd) {
      keys.invalid("an attention layer's query heads must span embedding_length");
    }
    layer.window = hp.sliding_window;
  }
}

void read_lfm2(const HParamReader& keys, ModelHParams& hp) {
  read_lfm2_layers(keys, hp, /*windowed=*/true);
}

void read_lfm2moe(const HParamReader& keys, ModelHParams& hp) {
  read_lfm2_layers(keys, hp, /*windowed=*/false);
  for (const char* key : {"expert_feed_forward_length", "expert_gating_func"}) keys.require(key);
  hp.n_layer_dense_lead = keys.uint_or("leading_dense_block_count", 0);
  read_expert_hparams(keys, hp, /*width_key=*/true, /*shared_expert=*/false);
  hp.router.gating = read_expert_gating(keys, std::nullopt);
  hp.router.normalize = true;
  hp.router.scale = 0.0f;
}

// LFM2's shape in small: every third layer and the last attention
// (LFM2-350M: 6 of 16), the others short convolutions of 3 taps.
void write_lfm2_layers(const ModelGeometry& g, std::string_view arch,
                       std::vector<gguf::KeyValue>& keys) {
  const std::string p = std::string(arch) + ".";
  write_u32_per_layer(
      p + "attention.head_count_kv", g.n_layer,
      [&](int64_t il) { return attends_in_small(g, il) ? g.n_head_kv : 0; }, keys);
  keys.push_back({p + "shortconv.l_cache", u32_value(3)});
}

void write_lfm2(const ModelGeometry& g, std::vector<gguf::KeyValue>& keys) {
  write_lfm2_layers(g, "lfm2", keys);
}

// LFM2-8B-A1B's shape in small: LFM2's layers, the first FFN dense, the
// others four experts (two per token) with sigmoid gating.
void write_lfm2moe(const ModelGeometry& g, std::vector<gguf::KeyValue>& keys) {
  write_lfm2_layers(g, "lfm2moe", keys);
  keys.push_back({"lfm2moe.leading_dense_block_count", u32_value(1)});
  keys.push_back({"lfm2moe.expert_feed_forward_length", u32_value(g.n_ff)});
  write_expert_counts(g, "lfm2moe", keys);
  keys.push_back({"lfm2moe.expert_gating_func", u32_value(2)});
}

}  // namespace

const Family kLfm2Family{.arch = "lfm2",
                         .neox_rope = true,
                         .make = make_model<Lfm2Model>,
                         .read_hparams = read_lfm2,
                         .tensors = tensors_of<Lfm2Weights>,
                         .write_hparams = write_lfm2,
                         .fixed_head_dim = true,
                         .layers_may_lack_parts = true};

const Family kLfm2MoeFamily{.arch = "lfm2moe",
                            .neox_rope = true,
                            .make = make_model<Lfm2Model>,
                            .read_hparams = read_lfm2moe,
                            .tensors = tensors_of<Lfm2Weights>,
                            .write_hparams = write_lfm2moe,
                            .fixed_head_dim = true,
                            .layers_may_lack_parts = true};

}  // namespace cortiq
