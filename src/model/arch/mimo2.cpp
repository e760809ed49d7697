// Xiaomi's MiMo V2 (`mimo2`: MiMo-V2-Flash, MiMo-V2.5): a pre-norm
// mixture-of-experts decoder whose attention mixes sliding-window and full
// layers, each kind with its own number of KV heads, values narrower than
// keys, learned sinks, and its output scaled:
//
//   x = token_embd[token]
//   for each layer:
//     x += value_scale * attention(rms_norm(x) * attn_norm)
//            Q/K/V apart or fused (biases and scales read, not applied, as
//            llama.cpp's graph projects with the bare matrices); NeoX RoPE on
//            rope.dimension_count of each key_length-wide head; values
//            value_length wide; per-head sinks where the file has them
//     h  = rms_norm(x) * ffn_norm
//     x += layer has a router ? moe(h) : ffn(h)     SwiGLU
//   logits = output(rms_norm(x) * output_norm)
//
// Attention: attention.sliding_window_pattern (an array, 1 = sliding
// window) says which layers see the last attention.sliding_window
// positions; those use rope.freq_base_swa (llama.cpp's default 10000, not
// the global base) unscaled, the others the global RoPE. head_count_kv is
// per layer (MiMo-V2-Flash: 4 on full layers, 8 on sliding ones). Scores
// are scaled by 1/sqrt(key_length) whatever attention.scale says.
// Experts: sigmoid scores; the selection bias exp_probs_b (optional)
// chooses the k best, whose sigmoids are renormalized to sum 1 and never
// scaled — llama.cpp's graph fixes all three and reads none of the router
// keys. The layers before the first router are dense (MiMo-V2-Flash's
// first), n_ff wide.
//
// Multi-token prediction: nextn_predict_layers layers after the trunk (three
// in the released checkpoints), each an attention, a dense FFN and the
// nextn.* tensors (blocks/nextn.hpp), with an optional layer_output_norm:
// bound and checked, not run, as llama.cpp decodes without an MTP draft. A
// file without them (no blk.N.nextn.eh_proj) runs the trunk the same.
#include <iterator>
#include <memory>

#include "base/strings.hpp"
#include "formats/gguf/gguf_file.hpp"
#include "model/arch/arch.hpp"
#include "model/arch/family_support.hpp"
#include "model/arch/pre_norm_layer.hpp"
#include "model/blocks/moe.hpp"
#include "model/blocks/nextn.hpp"
#include "model/decoder_model.hpp"
#include "model/gen_model/arch_spec.hpp"
#include "model/rope_setup.hpp"
#include "model/weights.hpp"

namespace cortiq {

namespace {

// Layer il's attention tensors: Q/K/V (or the fused QKV) with biases and
// scales that change nothing, and sinks where the file has them (gen-model:
// on the sliding-window layers, as MiMo-V2-Flash's checkpoints).
AttentionTensors attention_tensors(TensorVisitor& v, const ModelHParams& hp, int64_t il) {
  return {.qkv_effect = QkvEffect::none_fused_readable,
          .sinks = v.has(layer_tensor_name(il, "attn_sinks.weight"),
                         /*written=*/hp.layer(il).window > 0)};
}

struct MtpLayer {
  PreNormLayer block;
  NextnTensors nextn;
  std::vector<float> output_norm;  // layer_output_norm, optional
};

struct Mimo2Weights {
  TokenEmbedding embedding;
  OutputHead head;
  RopeTables rope;
  std::vector<PreNormMoeLayer> layers;
  std::vector<MtpLayer> mtp;  // bound, not run

  void visit(TensorVisitor& v, const ModelHParams& hp) {
    embedding.visit(v, hp);
    head.visit(v, hp, embedding, OutputMatrix::own);
    for (int64_t il = 0; il < hp.n_layer; ++il) {
      layers.emplace_back().visit(v, hp, il, attention_tensors(v, hp, il),
                                  {.selection_bias = true});
    }
    visit_mtp(v, hp);
  }

  // llama.cpp's trunk_only: MTP layers whose first has no eh_proj are not read.
  void visit_mtp(TensorVisitor& v, const ModelHParams& hp) {
    visit_mtp_layers(
        v, hp, /*required=*/false, [&](TensorVisitor& mtp_v, const ModelHParams& all, int64_t il) {
          MtpLayer& layer = mtp.emplace_back();
          layer.block.visit(mtp_v, all, il, attention_tensors(mtp_v, all, il),
                            {.scales_applied = false});
          layer.nextn.visit(mtp_v, hp, il);
          mtp_v.vector(layer.output_norm, layer_tensor_name(il, "layer_output_norm.weight"),
                       hp.n_embd, TensorKind::norm, /*required=*/false);
        });
  }
};

// attention.sliding_window_pattern: one number for every layer (llama.cpp's
// get_key_or_arr: non-zero makes them all sliding) or one per trunk layer.
// The converter writes one per block (the MTP layers' too); llama.cpp
// refuses that length, Cortiq takes the trunk's part of it.
void read_sliding_layers(const HParamReader& keys, ModelHParams& hp) {
  const char* key = "attention.sliding_window_pattern";
  const gguf::Value* value = keys.file().find(keys.key(key));
  const gguf::Array* array = value != nullptr ? value->as_array() : nullptr;
  const int64_t n_all = std::ssize(hp.layers);
  const int64_t n = array != nullptr && std::ssize(*array) == n_all ? n_all : hp.n_layer;
  const auto sliding = keys.per_layer_uint(key, n, 0);
  hp.sliding_window = keys.required_uint("attention.sliding_window");
  if (hp.sliding_window <= 0) keys.invalid("attention.sliding_window must be positive");
  for (int64_t il = 0; il < n; ++il) {
    if (sliding[static_cast<size_t>(il)] == 0) continue;
    hp.layers[static_cast<size_t>(il)].window = hp.sliding_window;
    hp.layers[static_cast<size_t>(il)].rope = RopeSlot::local;
  }
}

void read_mimo2(const HParamReader& keys, ModelHParams& hp) {
  for (const char* key : {"attention.layer_norm_rms_epsilon", "expert_feed_forward_length",
                          "attention.sliding_window_pattern"}) {
    keys.require(key);
  }
  hp.attention_scale = 0.0f;
  read_sliding_layers(keys, hp);
  // The sliding layers' RoPE: llama.cpp's rope_freq_base_train_swa and
  // rope_freq_scale_train_swa, which only this key sets (default 10000, 1).
  hp.rope_local.freq_base = keys.float_or("rope.freq_base_swa", 10000.0f);
  if (!(hp.rope_local.freq_base > 0.0f)) keys.invalid("rope.freq_base_swa must be positive");
  // What the sliding layers' unscaled RoPE would do under YaRN (llama.cpp
  // passes them the global YaRN factors with a scale of 1) is not followed
  // here; llama3 scaling has no rope_freqs in this family.
  if (hp.rope.scaling != RopeScalingType::none && hp.rope.scaling != RopeScalingType::linear) {
    keys.invalid("mimo2 runs RoPE unscaled or linearly scaled only (rope.scaling.type)");
  }
  hp.rope_local.freq_scale = 1.0f;
  // Every dense FFN is llama.cpp's n_ff wide (the first layer's).
  for (LayerSpec& layer : hp.layers) layer.n_ff = hp.n_ff;
  if (const float scale = keys.float_or("attention.value_scale", 1.0f); scale != 1.0f) {
    hp.attn_output_scale = scale;
  }
  read_expert_hparams(keys, hp, /*width_key=*/true, /*shared_expert=*/false);
  hp.router = {.gating = RouterGating::sigmoid,
               .normalize = true,
               .n_groups = hp.router.n_groups,
               .n_groups_used = hp.router.n_groups_used};
  hp.n_layer_dense_lead = dense_lead_from_routers(keys, hp.n_layer);
}

// MiMo-V2-Flash's shape in small: sliding-window layers first, the last
// trunk layer full with half the KV heads (when they divide), values half
// as wide as keys, half of each head rotated, the sliding layers' RoPE base
// a tenth of the global one, the value scale 0.707, the first layer dense,
// four experts (two per token) and one MTP layer.
void write_mimo2(const ModelGeometry& g, std::vector<gguf::KeyValue>& keys) {
  const std::string p = "mimo2.";
  const int64_t hd = g.resolved_head_dim();
  write_half_rotary(g, "mimo2", keys);
  write_mtp_layer(g, "mimo2", keys);
  const int64_t n_blocks = g.n_layer + 1;
  const bool halve = g.n_head_kv % 2 == 0;
  const auto sliding = [&](int64_t il) { return il < g.n_layer - 1 || il >= g.n_layer; };
  write_u32_per_layer(
      p + "attention.head_count_kv", n_blocks,
      [&](int64_t il) { return sliding(il) || !halve ? g.n_head_kv : g.n_head_kv / 2; }, keys);
  // llama.cpp reads the pattern for the trunk's layers only.
  write_u32_per_layer(
      p + "attention.sliding_window_pattern", g.n_layer,
      [&](int64_t il) { return sliding(il) ? 1 : 0; }, keys);
  keys.push_back({p + "attention.sliding_window", u32_value(g.resolved_sliding_window())});
  keys.push_back({p + "attention.key_length", u32_value(hd)});
  keys.push_back({p + "attention.value_length", u32_value(hd % 2 == 0 ? hd / 2 : hd)});
  keys.push_back({p + "attention.value_scale", gguf::Value(0.707f)});
  keys.push_back({p + "rope.freq_base_swa", gguf::Value(static_cast<float>(g.rope_base / 10))});
  keys.push_back({p + "expert_feed_forward_length", u32_value(g.n_ff)});
  write_expert_counts(g, "mimo2", keys);
}

// MiMo-V2-Flash's routers carry the selection bias (noaux_tc).
constexpr std::string_view kMimo2Converted[] = {"exp_probs_b.bias"};

}  // namespace

const Family kMimo2Family{.arch = "mimo2",
                          .neox_rope = true,
                          .make = make_model<PreNormModel<Mimo2Weights>>,
                          .read_hparams = read_mimo2,
                          .tensors = tensors_of<Mimo2Weights>,
                          .write_hparams = write_mimo2,
                          .mtp_layers = true,
                          .converted_optional = kMimo2Converted};

}  // namespace cortiq
