// NVIDIA's Nemotron-H (`nemotron_h`: Nemotron-H 8B / 47B / 56B, Nemotron
// Nano 2 9B / 12B) and Nemotron 3 (`nemotron_h_moe`: Nano 30B-A3B, Super):
// a pre-norm stack whose every layer is ONE of three blocks, each with its
// own norm and residual add and no second sub-layer:
//
//   x = token_embd[token]
//   for each layer:
//     h = rms_norm(x) * attn_norm
//     x += mamba2(h)          head_count_kv[l] == 0 and feed_forward_length[l] == 0
//          attention(h)       feed_forward_length[l] == 0: no RoPE, scores by
//                             attention.scale (0: 1/sqrt(head size))
//          ffn(h)             otherwise: down(relu(up(h))^2), or with experts
//                             moe(h) + shared(h), both squared-ReLU and ungated
//   logits = output(rms_norm(x) * output_norm)    output = token_embd if absent
//
// The experts are routed by a sigmoid whatever the file says (llama.cpp's
// graph), chosen with the selection bias exp_probs_b (required), their
// weights renormalized when expert_weights_norm and scaled by
// expert_weights_scale; with moe_latent_size (Nemotron 3 Super) they work
// in that width between ffn_latent_down and ffn_latent_up. Both names run
// both kinds of FFN, as llama.cpp does. The Mamba-2 layers keep their state
// per sequence in the KV cache (blocks/mamba2.hpp); FFN layers cache nothing.
#include <algorithm>
#include <memory>

#include "base/strings.hpp"
#include "kernels/cpu/activations.hpp"
#include "model/arch/arch.hpp"
#include "model/arch/family_support.hpp"
#include "model/blocks/attention.hpp"
#include "model/blocks/embedding.hpp"
#include "model/blocks/ffn.hpp"
#include "model/blocks/mamba2.hpp"
#include "model/blocks/moe.hpp"
#include "model/blocks/nextn.hpp"
#include "model/decoder_model.hpp"
#include "model/gen_model/arch_spec.hpp"
#include "model/rope_setup.hpp"
#include "model/tensor_table.hpp"
#include "model/weights.hpp"

namespace cortiq {

namespace {

enum class BlockKind : uint8_t { mamba2, attention, ffn };

// As read_nemotron_h leaves the layers: recurrent ones with state, FFN
// ones with a width (and no heads), attention ones with neither.
BlockKind block_kind(const LayerSpec& layer) {
  if (layer.is_recurrent()) return BlockKind::mamba2;
  return layer.n_ff > 0 ? BlockKind::ffn : BlockKind::attention;
}

struct NemotronHLayer {
  std::vector<float> norm;  // attn_norm, before every kind of block
  Mamba2Weights ssm;
  AttentionWeights attn;
  FfnWeights ffn;  // or, with experts:
  MoeWeights moe;
};

// Nemotron 3's multi-token-prediction block (llama.cpp's load_block_mtp
// of nemotron_h): one attention sub-layer and one expert sub-layer after
// the trunk. Bound and checked, not run.
struct NemotronHMtpLayer {
  std::vector<float> attn_norm, post_attn_norm;
  AttentionWeights attn;
  MoeWeights moe;
  NextnTensors nextn;
};

struct NemotronHWeights {
  TokenEmbedding embedding;
  OutputHead head;
  RopeTables rope;  // none used
  std::vector<NemotronHLayer> layers;
  std::vector<NemotronHMtpLayer> mtp;

  // As llama.cpp's nemotron_h loader.
  void visit(TensorVisitor& v, const ModelHParams& hp) {
    embedding.visit(v, hp);
    head.visit(v, hp, embedding, OutputMatrix::own_or_tied);
    for (int64_t il = 0; il < hp.n_layer; ++il) {
      NemotronHLayer& layer = layers.emplace_back();
      v.vector(layer.norm, layer_tensor_name(il, "attn_norm.weight"), hp.n_embd, TensorKind::norm);
      switch (block_kind(hp.layer(il))) {
        case BlockKind::mamba2:
          layer.ssm.visit(v, hp, il);
          break;
        case BlockKind::attention:
          layer.attn.visit(v, hp, il, {.output_bias = AttnOutputBias::optional});
          break;
        case BlockKind::ffn:
          if (hp.n_expert > 0) {
            layer.moe.visit(v, hp, il,
                            {.scales_applied = true,
                             .shared_expert = SharedExpert::always,
                             .shared_scales_applied = true,
                             .selection_bias_required = true,
                             .activation = ExpertActivation::relu_sqr,
                             .latent = true});
          } else {
            layer.ffn.visit(v, hp, il, {.gated = false, .biases = true});
          }
          break;
      }
    }
    visit_mtp(v, hp);
  }

  // llama.cpp skips the MTP layers without a draft: a file may leave them
  // out. Their experts are as wide as the trunk's, latent or not, with no
  // latent projections of their own.
  void visit_mtp(TensorVisitor& v, const ModelHParams& hp) {
    visit_mtp_layers(
        v, hp, /*required=*/false, [&](TensorVisitor& mtp_v, const ModelHParams& all, int64_t il) {
          NemotronHMtpLayer& layer = mtp.emplace_back();
          const auto name = [&](std::string_view what) { return layer_tensor_name(il, what); };
          layer.nextn.visit(mtp_v, hp, il, /*nemotron=*/true);
          mtp_v.vector(layer.attn_norm, name("attn_norm.weight"), hp.n_embd, TensorKind::norm,
                       true);
          layer.attn.visit(mtp_v, all, il, {.output_bias = AttnOutputBias::optional});
          mtp_v.vector(layer.post_attn_norm, name("post_attention_norm.weight"), hp.n_embd,
                       TensorKind::norm, true);
          layer.moe.visit(mtp_v, all, il,
                          {.shared_expert = SharedExpert::always,
                           .selection_bias_required = true,
                           .activation = ExpertActivation::relu_sqr,
                           .latent = true,
                           .latent_projections = false});
        });
  }
};

class NemotronHModel final : public FamilyModel<NemotronHWeights> {
 public:
  using FamilyModel::FamilyModel;

 private:
  void run_layers(std::span<const BatchRow> rows, std::span<const int32_t> cells, KvCache& cache,
                  ForwardContext& ctx, std::span<float> logits) const override {
    const auto& h = hparams_;
    const auto n = static_cast<int64_t>(rows.size());
    const LayerStream s = start_layers(h, rows, cells, ctx, w_.embedding, w_.rope);
    for (const int64_t il : ctx.stage.layers()) {
      const NemotronHLayer& layer = w_.layers[static_cast<size_t>(il)];
      rms_norm(ctx, h, s.x, layer.norm, s.normed);
      switch (block_kind(h.layer(il))) {
        case BlockKind::mamba2:
          mamba2(layer.ssm, h, il, rows, cache, ctx, s.normed, s.branch);
          break;
        case BlockKind::attention:
          attention(layer.attn, h, il, s.pass, cache, ctx, s.normed, s.branch);
          break;
        case BlockKind::ffn:
          if (h.n_expert > 0) {
            moe_ffn(layer.moe, h, il, n, ctx, s.normed, s.branch);
          } else {
            ffn(layer.ffn, FfnActivation::relu_sqr, h, il, n, ctx, s.normed, s.branch);
          }
          break;
      }
      ctx.backend.add(s.x, s.branch);
    }
    w_.head.apply(h, rows, s.x, ctx, logits);
  }
};

// The experts, when expert_count says so: sigmoid routing (llama.cpp's
// graph fixes it), the shared expert's width required (llama.cpp's default
// of 0 cannot load), the expert width by default the FFN layers' width over
// the experts used.
void read_nemotron_h_experts(const HParamReader& keys, ModelHParams& hp) {
  if (keys.uint_or("expert_count", 0) == 0) return;
  keys.require("expert_shared_feed_forward_length");
  read_expert_hparams(keys, hp, /*width_key=*/true, /*shared_expert=*/true);
  hp.router.gating = RouterGating::sigmoid;
  hp.router.normalize = keys.bool_or("expert_weights_norm", false);
  hp.router.scale = keys.float_or("expert_weights_scale", 0.0f);
  hp.moe_latent_size = keys.uint_or("moe_latent_size", 0);
}

void read_nemotron_h(const HParamReader& keys, ModelHParams& hp) {
  keys.require("attention.layer_norm_rms_epsilon");
  read_ssm_hparams(keys, hp);
  // The FFN layers' width, for the experts' default (the first layer is
  // usually Mamba-2, with none).
  const auto ffn_layer =
      std::ranges::find_if(hp.layers, [](const LayerSpec& l) { return l.n_ff > 0; });
  hp.n_ff = ffn_layer != hp.layers.end() ? ffn_layer->n_ff : 0;
  read_nemotron_h_experts(keys, hp);
  for (int64_t il = 0; il < hp.n_layer; ++il) hp.experts_in_layer.push_back(hp.layer(il).n_ff > 0);
  for (int64_t il = 0; il < std::ssize(hp.layers); ++il) {
    LayerSpec& layer = hp.layers[static_cast<size_t>(il)];
    layer.rope = RopeSlot::none;
    // A multi-token-prediction layer after the trunk: attention and experts.
    if (il >= hp.n_layer) continue;
    if (layer.n_ff > 0) {  // an FFN layer: no attention, whatever its head counts
      layer.n_head = 0;
      layer.n_head_kv = 0;
    } else if (layer.n_head_kv == 0) {
      layer.state_width = mamba2_state_width(hp);
      layer.recurrent = RecurrentKind::mamba2;
    } else if (layer.head_dim_k != layer.head_dim_v) {
      keys.invalid("key and value heads must be as wide");
    }
  }
}

// gen-model's layers: Mamba-2, FFN, attention, in turn (Nemotron-H 8B's
// "M-M-M-M*-..." in small).
BlockKind kind_in_small(int64_t il) {
  constexpr BlockKind kCycle[] = {BlockKind::mamba2, BlockKind::ffn, BlockKind::attention};
  return kCycle[il % 3];
}

// With `mtp`, one multi-token-prediction layer after them (attending, as
// the converter lists it).
void write_nemotron_h_layers(const ModelGeometry& g, std::string_view arch, bool mtp,
                             std::vector<gguf::KeyValue>& keys) {
  const std::string p = std::string(arch) + ".";
  const auto attends = [&](int64_t il) {
    return il >= g.n_layer || kind_in_small(il) == BlockKind::attention;
  };
  const int64_t n_all = g.n_layer + (mtp ? 1 : 0);
  write_u32_per_layer(
      p + "attention.head_count_kv", n_all,
      [&](int64_t il) { return attends(il) ? g.n_head_kv : 0; }, keys);
  write_u32_per_layer(
      p + "feed_forward_length", n_all,
      [&](int64_t il) {
        return il < g.n_layer && kind_in_small(il) == BlockKind::ffn ? g.n_ff : 0;
      },
      keys);
  if (mtp) write_mtp_layer(g, arch, keys);
  write_mamba2_keys(g, arch, keys);
  // Nemotron-H's Mamba-2 layers norm in groups (8 in the real models).
  for (gguf::KeyValue& kv : keys) {
    if (kv.key == p + "ssm.group_count") kv.value = u32_value(2);
  }
  keys.push_back({p + "attention.layer_norm_epsilon", gguf::Value(1e-5f)});
}

void write_nemotron_h(const ModelGeometry& g, std::vector<gguf::KeyValue>& keys) {
  write_nemotron_h_layers(g, "nemotron_h", /*mtp=*/false, keys);
}

// Nemotron 3 Super's experts in small: four (two per token) squared-ReLU
// experts in a latent width of half n_embd, a shared expert, the weights
// renormalized and scaled (Nano 30B-A3B: 2.5); its MTP layer.
void write_nemotron_h_moe(const ModelGeometry& g, std::vector<gguf::KeyValue>& keys) {
  write_nemotron_h_layers(g, "nemotron_h_moe", /*mtp=*/true, keys);
  const std::string p = "nemotron_h_moe.";
  write_expert_counts(g, "nemotron_h_moe", keys);
  keys.push_back({p + "expert_feed_forward_length", u32_value(g.n_ff)});
  keys.push_back({p + "expert_shared_feed_forward_length", u32_value(g.n_ff)});
  keys.push_back({p + "expert_weights_norm", gguf::Value(true)});
  keys.push_back({p + "expert_weights_scale", gguf::Value(2.5f)});
  keys.push_back({p + "moe_latent_size", u32_value(g.n_embd / 2)});
}

}  // namespace

const Family kNemotronHFamily{.arch = "nemotron_h",
                              .make = make_model<NemotronHModel>,
                              .read_hparams = read_nemotron_h,
                              .tensors = tensors_of<NemotronHWeights>,
                              .write_hparams = write_nemotron_h,
                              .layers_may_lack_parts = true};
const Family kNemotronHMoeFamily{.arch = "nemotron_h_moe",
                                 .make = make_model<NemotronHModel>,
                                 .read_hparams = read_nemotron_h,
                                 .tensors = tensors_of<NemotronHWeights>,
                                 .write_hparams = write_nemotron_h_moe,
                                 .layers_may_lack_parts = true,
                                 .mtp_layers = true};

}  // namespace cortiq
