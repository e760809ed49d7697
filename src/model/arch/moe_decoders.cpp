// Pre-norm decoders whose feed-forward is a mixture of experts
// (blocks/moe.hpp): Qwen1.5/Qwen2-MoE (`qwen2moe`), Qwen3-MoE (`qwen3moe`),
// AI2's OLMoE (`olmoe`), Baidu's ERNIE 4.5 MoE (`ernie4_5-moe`),
// Tencent's Hunyuan-A13B (`hunyuan-moe`), MiniMax-M2 (`minimax-m2`) and
// PowerInfer's SmallThinker (`smallthinker`).
//
//   x = token_embd[token]
//   for each layer:
//     x += attention(rms_norm(x) * attn_norm)     NeoX RoPE
//     x += moe(rms_norm(x) * ffn_norm)            softmax router, SwiGLU experts
//   logits = output(rms_norm(x) * output_norm)
//
// qwen2moe: Q/K/V biases; the chosen weights not renormalized; a shared
//           expert added, gated by sigmoid(ffn_gate_inp_shexp . x).
// qwen3moe: per-head RMS norms on Q and K; the chosen weights renormalized;
//           the experts' scales (ffn_*_exps.scale) applied; output may be tied.
// olmoe:    RMS norms over the whole Q and K projections (Q/K/V without
//           biases or scales); weights not renormalized; experts n_ff wide.
// ernie4_5-moe: RoPE on adjacent pairs over the whole head; the first
//           leading_dense_block_count layers dense; the chosen weights
//           renormalized, chosen with the optional correction bias
//           exp_probs_b; a shared expert (expert_shared_feed_forward_length
//           wide) always on when that key is positive; the experts' gate
//           optional (silu(up) without it). attn_output.bias is read and,
//           as in llama.cpp's graph, not added.
// hunyuan-moe: per-head RMS norms on Q and K after RoPE (as hunyuan-dense);
//           experts n_ff wide (llama.cpp requires expert_feed_forward_length
//           and shapes the experts by n_ff); weights renormalized; a shared
//           expert always on, expert_shared_feed_forward_length (or n_ff)
//           wide.
// minimax-m2: olmoe's attention (RMS norms over the whole Q and K
//           projections; Q/K/V biases read, not added) with NeoX RoPE on
//           part of each head; sigmoid (or softmax) routing as
//           expert_gating_func says (required), the correction bias
//           exp_probs_b (required), weights renormalized; experts n_ff wide
//           (expert_feed_forward_length required, unused); output its own.
// smallthinker: the router scores the layer's input (before its attention
//           norm), the experts run on the FFN's normed input with ReGLU
//           (relu(gate) * up); gating as expert_gating_func says (required),
//           weights renormalized. With attention.sliding_window set, as
//           llama.cpp decides: every layer but the first of each
//           attention.sliding_window_pattern period (default 4) sees a
//           4096-position window (whatever the key says) rotated with
//           rope.freq_base_swa, and every 4th layer from the first has no
//           RoPE; without it every layer is full and rotated.
// llama.cpp reads no expert_weights_scale for these: no routing scale.
#include <iterator>
#include <memory>

#include "base/strings.hpp"
#include "formats/gguf/gguf_file.hpp"
#include "model/arch/arch.hpp"
#include "model/arch/family_support.hpp"
#include "model/arch/pre_norm_layer.hpp"
#include "model/blocks/attention.hpp"
#include "model/blocks/embedding.hpp"
#include "model/blocks/moe.hpp"
#include "model/decoder_model.hpp"
#include "model/gen_model/arch_spec.hpp"
#include "model/rope_setup.hpp"
#include "model/weights.hpp"

namespace cortiq {

namespace {

enum class Kind { qwen2moe, qwen3moe, olmoe, ernie, hunyuan, minimax, smallthinker };

Kind kind_of(std::string_view arch) {
  if (arch == "qwen2moe") return Kind::qwen2moe;
  if (arch == "qwen3moe") return Kind::qwen3moe;
  if (arch == "ernie4_5-moe") return Kind::ernie;
  if (arch == "hunyuan-moe") return Kind::hunyuan;
  if (arch == "minimax-m2") return Kind::minimax;
  if (arch == "smallthinker") return Kind::smallthinker;
  return Kind::olmoe;
}

AttentionTensors attention_tensors(Kind kind) {
  switch (kind) {
    case Kind::qwen2moe:
    case Kind::ernie:
    case Kind::smallthinker:
      return {};
    case Kind::qwen3moe:
      return {.qk_norm = QkNorm::required};
    case Kind::olmoe:
    case Kind::minimax:
      return {.qkv_effect = QkvEffect::none,
              .qk_norm = QkNorm::required,
              .qk_norm_shape = QkNormShape::whole};
    case Kind::hunyuan:
      return {.qk_norm = QkNorm::required, .qk_norm_after_rope = true};
  }
  return {};
}

MoeTensors expert_tensors(Kind kind, const ModelHParams& hp) {
  switch (kind) {
    case Kind::qwen2moe:
      return {.shared_expert = SharedExpert::gated};
    case Kind::qwen3moe:
      return {.scales_applied = true};
    case Kind::olmoe:
      return {};
    case Kind::ernie:
      return {
          .gate_optional = true,
          .shared_expert = hp.n_ff_shared_expert > 0 ? SharedExpert::always : SharedExpert::none,
          .selection_bias = true};
    case Kind::hunyuan:
      return {.shared_expert = SharedExpert::always};
    case Kind::minimax:
      return {.selection_bias_required = true};
    case Kind::smallthinker:
      return {.activation = ExpertActivation::reglu, .router_input = RouterInput::layer_input};
  }
  return {};
}

struct MoeDecoderWeights {
  TokenEmbedding embedding;
  OutputHead head;
  RopeTables rope;
  std::vector<PreNormMoeLayer> layers;

  void visit(TensorVisitor& v, const ModelHParams& hp) {
    const Kind kind = kind_of(hp.arch);
    embedding.visit(v, hp);
    const bool tied = kind == Kind::qwen3moe || kind == Kind::ernie || kind == Kind::hunyuan ||
                      kind == Kind::smallthinker;
    head.visit(v, hp, embedding, tied ? OutputMatrix::own_or_tied : OutputMatrix::own);
    for (int64_t il = 0; il < hp.n_layer; ++il) {
      layers.emplace_back().visit(v, hp, il, attention_tensors(kind), expert_tensors(kind, hp));
      if (kind == Kind::ernie) {
        v.without_effect(layer_tensor_name(il, "attn_output.bias"), hp.n_embd, TensorKind::bias);
      }
    }
  }
};

void read_qwen_moe(const HParamReader& keys, ModelHParams& hp) {
  keys.require("attention.layer_norm_rms_epsilon");
  read_expert_hparams(keys, hp, /*width_key=*/true, /*shared_expert=*/hp.arch == "qwen2moe");
  hp.router.normalize = hp.arch == "qwen3moe";
}

void read_olmoe(const HParamReader& keys, ModelHParams& hp) {
  keys.require("attention.layer_norm_rms_epsilon");
  read_expert_hparams(keys, hp, /*width_key=*/false, /*shared_expert=*/false);
}

void read_ernie_moe(const HParamReader& keys, ModelHParams& hp) {
  read_whole_rotation_hparams(keys, hp);
  keys.require("expert_feed_forward_length");
  read_expert_hparams(keys, hp, /*width_key=*/true, /*shared_expert=*/false);
  hp.n_ff_shared_expert = keys.uint_or("expert_shared_feed_forward_length", 0);
  hp.n_layer_dense_lead = keys.uint_or("leading_dense_block_count", 0);
  if (hp.n_layer_dense_lead > hp.n_layer) keys.invalid("leading_dense_block_count > block_count");
  // llama.cpp's loader gives every layer from the dense lead on experts,
  // its graph only those with (layer + 1) % step == 0: they agree (ERNIE
  // 4.5's checkpoints have a step of 1) when every such layer is both.
  const int64_t step = keys.required_uint("interleave_moe_layer_step");
  if (step <= 0) keys.invalid("interleave_moe_layer_step must be positive");
  for (int64_t il = hp.n_layer_dense_lead; il < hp.n_layer; ++il) {
    if ((il + 1) % step != 0) {
      keys.invalid(
          strfmt("interleave_moe_layer_step %lld leaves layer %lld without experts, "
                 "which llama.cpp's loader gives it",
                 static_cast<long long>(step), static_cast<long long>(il)));
    }
  }
  hp.router.normalize = true;
}

void read_minimax_m2(const HParamReader& keys, ModelHParams& hp) {
  keys.require("attention.layer_norm_rms_epsilon");
  keys.require("expert_feed_forward_length");
  if (hp.head_dim_k != hp.head_dim_v) keys.invalid("key and value heads must be as wide");
  hp.attention_scale = 0.0f;
  read_expert_hparams(keys, hp, /*width_key=*/false, /*shared_expert=*/false);
  hp.router.gating = read_expert_gating(keys, std::nullopt);
  hp.router.normalize = true;
}

void read_smallthinker(const HParamReader& keys, ModelHParams& hp) {
  keys.require("attention.layer_norm_rms_epsilon");
  keys.require("expert_feed_forward_length");
  require_whole_rotation(keys, hp);
  hp.attention_scale = 0.0f;
  read_expert_hparams(keys, hp, /*width_key=*/true, /*shared_expert=*/false);
  hp.router.gating = read_expert_gating(keys, std::nullopt);
  hp.router.normalize = true;
  if (keys.uint_or("attention.sliding_window", 0) == 0) return;
  // llama.cpp's loader: a 4096 window, the period a number (an array
  // leaves 4), the first layer of each period full; no RoPE every 4th layer.
  constexpr int64_t kWindow = 4096, kNoRopeStep = 4;
  const gguf::Value* pattern = keys.file().find(keys.key("attention.sliding_window_pattern"));
  const int64_t period = pattern != nullptr && pattern->as_array() != nullptr
                             ? 4
                             : keys.uint_or("attention.sliding_window_pattern", 4);
  if (period <= 0) keys.invalid("attention.sliding_window_pattern must be positive");
  hp.sliding_window = kWindow;
  hp.rope_local.freq_base = keys.float_or("rope.freq_base_swa", hp.rope.freq_base);
  for (int64_t il = 0; il < std::ssize(hp.layers); ++il) {
    LayerSpec& layer = hp.layers[static_cast<size_t>(il)];
    if (il % period != 0) {
      layer.window = kWindow;
      layer.rope = RopeSlot::local;
    }
    if (il % kNoRopeStep == 0) layer.rope = RopeSlot::none;
  }
}

void read_hunyuan_moe(const HParamReader& keys, ModelHParams& hp) {
  keys.require("attention.layer_norm_rms_epsilon");
  keys.require("expert_feed_forward_length");
  require_whole_rotation(keys, hp);
  hp.attention_scale = 0.0f;
  read_expert_hparams(keys, hp, /*width_key=*/false, /*shared_expert=*/true);
  hp.router.normalize = true;
}

// gen-model: four experts, two of them per token, each expert n_ff wide
// (Qwen's converters write the width; OLMoE's is n_ff itself).
void write_expert_keys(const ModelGeometry& g, std::string_view arch, bool width_key,
                       bool shared_expert, std::vector<gguf::KeyValue>& keys) {
  const std::string prefix = std::string(arch) + ".";
  write_expert_counts(g, arch, keys);
  if (width_key) keys.push_back({prefix + "expert_feed_forward_length", u32_value(g.n_ff)});
  if (shared_expert)
    keys.push_back({prefix + "expert_shared_feed_forward_length", u32_value(g.n_ff)});
}

void write_qwen2moe(const ModelGeometry& g, std::vector<gguf::KeyValue>& keys) {
  write_expert_keys(g, "qwen2moe", true, true, keys);
}

void write_qwen3moe(const ModelGeometry& g, std::vector<gguf::KeyValue>& keys) {
  write_head_size(g, kQwen3MoeFamily, keys, /*always=*/true);
  write_expert_keys(g, "qwen3moe", true, false, keys);
}

void write_olmoe(const ModelGeometry& g, std::vector<gguf::KeyValue>& keys) {
  write_expert_keys(g, "olmoe", false, false, keys);
}

// ERNIE 4.5 MoE's shape: the first layer dense, a shared expert.
void write_ernie_moe(const ModelGeometry& g, std::vector<gguf::KeyValue>& keys) {
  write_expert_keys(g, "ernie4_5-moe", true, true, keys);
  keys.push_back({"ernie4_5-moe.interleave_moe_layer_step", u32_value(1)});
  keys.push_back({"ernie4_5-moe.leading_dense_block_count", u32_value(1)});
}

void write_hunyuan_moe(const ModelGeometry& g, std::vector<gguf::KeyValue>& keys) {
  write_expert_keys(g, "hunyuan-moe", true, true, keys);
}

// MiniMax-M2's shape in small: half of each head rotated, sigmoid routing.
void write_minimax_m2(const ModelGeometry& g, std::vector<gguf::KeyValue>& keys) {
  write_expert_keys(g, "minimax-m2", true, false, keys);
  keys.push_back({"minimax-m2.expert_gating_func", u32_value(2)});
  write_half_rotary(g, "minimax-m2", keys);
}

// SmallThinker-4B's shape in small: its windows (the key's value is
// llama.cpp's to replace) and period, a local base, sigmoid routing.
void write_smallthinker(const ModelGeometry& g, std::vector<gguf::KeyValue>& keys) {
  write_expert_keys(g, "smallthinker", true, false, keys);
  keys.push_back({"smallthinker.expert_gating_func", u32_value(2)});
  keys.push_back({"smallthinker.attention.sliding_window", u32_value(4096)});
  keys.push_back({"smallthinker.attention.sliding_window_pattern", u32_value(4)});
  keys.push_back({"smallthinker.rope.freq_base_swa", gguf::Value(5000.0f)});
}

constexpr std::string_view kQwen2MoeOptional[] = {"attn_q.bias", "attn_k.bias", "attn_v.bias"};

}  // namespace

const Family kQwen2MoeFamily{.arch = "qwen2moe",
                             .neox_rope = true,
                             .make = make_model<PreNormModel<MoeDecoderWeights>>,
                             .read_hparams = read_qwen_moe,
                             .tensors = tensors_of<MoeDecoderWeights>,
                             .write_hparams = write_qwen2moe,
                             .fixed_head_dim = true,
                             .converted_optional = kQwen2MoeOptional};
const Family kQwen3MoeFamily{.arch = "qwen3moe",
                             .neox_rope = true,
                             .make = make_model<PreNormModel<MoeDecoderWeights>>,
                             .read_hparams = read_qwen_moe,
                             .tensors = tensors_of<MoeDecoderWeights>,
                             .write_hparams = write_qwen3moe};
const Family kOlmoeFamily{.arch = "olmoe",
                          .neox_rope = true,
                          .make = make_model<PreNormModel<MoeDecoderWeights>>,
                          .read_hparams = read_olmoe,
                          .tensors = tensors_of<MoeDecoderWeights>,
                          .write_hparams = write_olmoe,
                          .fixed_head_dim = true};

const Family kErnie45MoeFamily{.arch = "ernie4_5-moe",
                               .neox_rope = false,
                               .make = make_model<PreNormModel<MoeDecoderWeights>>,
                               .read_hparams = read_ernie_moe,
                               .tensors = tensors_of<MoeDecoderWeights>,
                               .write_hparams = write_ernie_moe};
const Family kHunyuanMoeFamily{.arch = "hunyuan-moe",
                               .neox_rope = true,
                               .make = make_model<PreNormModel<MoeDecoderWeights>>,
                               .read_hparams = read_hunyuan_moe,
                               .tensors = tensors_of<MoeDecoderWeights>,
                               .write_hparams = write_hunyuan_moe};

const Family kMinimaxM2Family{.arch = "minimax-m2",
                              .neox_rope = true,
                              .make = make_model<PreNormModel<MoeDecoderWeights>>,
                              .read_hparams = read_minimax_m2,
                              .tensors = tensors_of<MoeDecoderWeights>,
                              .write_hparams = write_minimax_m2};

const Family kSmallThinkerFamily{.arch = "smallthinker",
                                 .neox_rope = true,
                                 .make = make_model<PreNormModel<MoeDecoderWeights>>,
                                 .read_hparams = read_smallthinker,
                                 .tensors = tensors_of<MoeDecoderWeights>,
                                 .write_hparams = write_smallthinker};

}  // namespace cortiq
