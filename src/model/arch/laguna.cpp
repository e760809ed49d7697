// poolside's Laguna (`laguna`: Laguna-XS.2, S.2, M.1): a pre-norm
// mixture-of-experts decoder whose attention output is gated by a softplus
// of the layer's input, with per-head Q/K RMS norms and, on XS.2, full and
// sliding-window layers each with their own heads and RoPE:
//
//   x = token_embd[token]
//   for each layer:
//     h  = rms_norm(x) * attn_norm
//     x += attn_output(attention(h) * softplus(attn_gate · h))
//            Q/K/V (or fused QKV) with biases and scales as build_qkv;
//            per-head Q/K RMS norms before NeoX RoPE; the gate one value per
//            head (XS.2) or per element (M.1), as its shape says
//     h  = rms_norm(x) * ffn_norm
//     x += layer < leading_dense_block_count ? ffn(h)          dense SwiGLU
//                                            : moe(h) + shared(h)
//   logits = output(rms_norm(x) * output_norm)    output = token_embd if absent
//
// Attention: with attention.sliding_window set, the first layer of each
// attention.sliding_window_pattern period (default 4) is full and the
// others see the window; head_count may differ per layer (XS.2: 48 full,
// 64 sliding). Full layers run the global RoPE (YaRN on XS.2) over
// rope.dimension_count; sliding ones plain RoPE over
// rope.dimension_count_swa (default the same) with rope.freq_base_swa
// (default the global base), unscaled — llama.cpp zeroes their YaRN terms.
// Scores are scaled by 1/sqrt(head size) whatever attention.scale says.
// Experts: the gating as the file says (default sigmoid), the selection
// bias exp_probs_b (required) choosing, renormalization and scale as the
// file says; the always-on shared expert expert_shared_feed_forward_length
// wide (default the experts' width times expert_shared_count, itself
// default 1).
#include <memory>

#include "formats/gguf/gguf_file.hpp"
#include "model/arch/arch.hpp"
#include "model/arch/family_support.hpp"
#include "model/arch/pre_norm_layer.hpp"
#include "model/blocks/moe.hpp"
#include "model/decoder_model.hpp"
#include "model/gen_model/arch_spec.hpp"
#include "model/rope_setup.hpp"
#include "model/weights.hpp"

namespace cortiq {

namespace {

struct LagunaWeights {
  TokenEmbedding embedding;
  OutputHead head;
  RopeTables rope;
  std::vector<PreNormMoeLayer> layers;

  void visit(TensorVisitor& v, const ModelHParams& hp) {
    embedding.visit(v, hp);
    head.visit(v, hp, embedding, OutputMatrix::own_or_tied);
    for (int64_t il = 0; il < hp.n_layer; ++il) {
      // gen-model: XS.2's per-head gate on sliding layers, M.1's per-element
      // one on full layers (llama.cpp takes either in any layer).
      const AttentionTensors attention{.qk_norm = QkNorm::required,
                                       .gate = OutputGate::softplus,
                                       .gate_written_per_element = hp.layer(il).window == 0};
      layers.emplace_back().visit(
          v, hp, il, attention,
          {.shared_expert = SharedExpert::always, .selection_bias_required = true});
    }
  }
};

// XS.2's sliding layers: the window, the pattern (one number, global
// first), and their plain RoPE.
void read_sliding_layers(const HParamReader& keys, ModelHParams& hp) {
  hp.sliding_window = keys.uint_or("attention.sliding_window", 0);
  if (hp.sliding_window == 0) return;
  const gguf::Value* pattern = keys.file().find(keys.key("attention.sliding_window_pattern"));
  if (pattern != nullptr && pattern->as_array() != nullptr) {
    keys.invalid("laguna's attention.sliding_window_pattern must be one number (a period)");
  }
  set_sliding_window_pattern(hp, hp.sliding_window,
                             keys.uint_or("attention.sliding_window_pattern", 4), RopeSlot::local,
                             /*global_first=*/true);
  RopeHParams& local = hp.rope_local;
  local.n_dims = keys.uint_or("rope.dimension_count_swa", hp.rope.n_dims);
  if (local.n_dims <= 0 || local.n_dims % 2 != 0 || local.n_dims > hp.head_dim_k) {
    keys.invalid("rope.dimension_count_swa must be even and within the head size");
  }
  local.freq_base = keys.float_or("rope.freq_base_swa", hp.rope.freq_base);
  if (!(local.freq_base > 0.0f)) keys.invalid("rope.freq_base_swa must be positive");
  local.scaling = RopeScalingType::none;
  local.freq_scale = 1.0f;
  local.ext_factor = 0.0f;
  local.attn_factor = 1.0f;
  local.beta_fast = 0.0f;
  local.beta_slow = 0.0f;
  local.n_ctx_orig = hp.n_ctx_train;
}

void read_laguna(const HParamReader& keys, ModelHParams& hp) {
  for (const char* key : {"attention.layer_norm_rms_epsilon", "leading_dense_block_count",
                          "expert_feed_forward_length"}) {
    keys.require(key);
  }
  if (hp.head_dim_k != hp.head_dim_v) keys.invalid("key and value heads must be as wide");
  hp.attention_scale = 0.0f;
  hp.n_layer_dense_lead = keys.required_uint("leading_dense_block_count");
  read_expert_hparams(keys, hp, /*width_key=*/true, /*shared_expert=*/false);
  hp.router.gating = read_expert_gating(keys, RouterGating::sigmoid);
  hp.router.normalize = keys.bool_or("expert_weights_norm", false);
  hp.router.scale = keys.float_or("expert_weights_scale", 0.0f);
  const int64_t shared_width = keys.uint_or("expert_shared_feed_forward_length", 0);
  hp.n_ff_shared_expert =
      shared_width > 0 ? shared_width : hp.n_ff_expert * keys.uint_or("expert_shared_count", 1);
  if (hp.n_ff_shared_expert <= 0) keys.invalid("the shared expert's width is 0");
  read_sliding_layers(keys, hp);
}

// Laguna-XS.2's shape in small: full and sliding layers alternating (the
// first full and dense), the sliding ones with a quarter more heads (a
// multiple of the KV heads), rotating the whole head with their own base
// where the full ones rotate half with YaRN (factor 4 over 16 positions,
// so the goldens cross it); the shared expert half the experts' width;
// sigmoid routing renormalized and scaled by 2.5.
void write_laguna(const ModelGeometry& g, std::vector<gguf::KeyValue>& keys) {
  const std::string p = "laguna.";
  const int64_t hd = g.resolved_head_dim();
  write_half_rotary(g, "laguna", keys);
  write_u32_per_layer(
      p + "attention.head_count", g.n_layer,
      [&](int64_t il) { return il % 2 != 0 ? g.n_head + g.n_head_kv : g.n_head; }, keys);
  keys.push_back({p + "attention.key_length", u32_value(hd)});
  keys.push_back({p + "attention.value_length", u32_value(hd)});
  keys.push_back({p + "attention.sliding_window", u32_value(g.resolved_sliding_window())});
  keys.push_back({p + "attention.sliding_window_pattern", u32_value(2)});
  keys.push_back({p + "rope.dimension_count_swa", u32_value(hd)});
  keys.push_back({p + "rope.freq_base_swa", gguf::Value(static_cast<float>(g.rope_base / 10))});
  keys.push_back({p + "rope.scaling.type", gguf::Value(std::string("yarn"))});
  keys.push_back({p + "rope.scaling.factor", gguf::Value(4.0f)});
  keys.push_back(
      {p + "rope.scaling.original_context_length", u32_value(std::min<int64_t>(g.n_ctx, 16))});
  keys.push_back({p + "leading_dense_block_count", u32_value(1)});
  keys.push_back({p + "expert_feed_forward_length", u32_value(g.n_ff)});
  keys.push_back({p + "expert_shared_feed_forward_length", u32_value(g.n_ff / 2)});
  write_expert_counts(g, "laguna", keys);
  keys.push_back({p + "expert_weights_norm", gguf::Value(true)});
  keys.push_back({p + "expert_weights_scale", gguf::Value(2.5f)});
}

}  // namespace

const Family kLagunaFamily{.arch = "laguna",
                           .neox_rope = true,
                           .make = make_model<PreNormModel<LagunaWeights>>,
                           .read_hparams = read_laguna,
                           .tensors = tensors_of<LagunaWeights>,
                           .write_hparams = write_laguna};

}  // namespace cortiq
