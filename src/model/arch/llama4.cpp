// Meta's Llama 4 Scout / Maverick (`llama4`), the text decoder: Llama's
// pre-norm layer with three kinds of interleaving:
//
//   x = token_embd[token]
//   for each layer:
//     x += attention(rms_norm(x) * attn_norm)
//            every 4th layer (il % 4 == 3): no RoPE, full attention, the
//            queries times the temperature 1 + 0.1 log(floor((pos + 1) /
//            8192) + 1); the others: RoPE (adjacent pairs, rope_freqs),
//            Q and K heads RMS-normed without weights after it (not on
//            128-expert files: Maverick), attention within 8192-position
//            chunks (floor(pos / 8192) * 8192 .. pos)
//     h  = rms_norm(x) * ffn_norm
//     x += (il + 1) % interleave_moe_layer_step == 0
//            ? moe(h) + shared(h)   sigmoid weights of the k best logits,
//                                   each expert reading h times its weight
//            : ffn(h)               dense SwiGLU, n_ff wide
//   logits = output(rms_norm(x) * output_norm)    output = token_embd if absent
//
// As llama.cpp's loader lays it out: the chunk (8192) and the temperature
// constants are its own, whatever the file says; the chunked layers are
// all but the last of each attention.sliding_window_pattern period
// (default 4) and rotate with rope.freq_base_swa (default the global base);
// the unrotated ones are every 4th whatever the period. Experts and the
// shared expert are expert_feed_forward_length wide. A file with
// attention.sliding_window 0 is refused: llama.cpp's graph asserts on its
// temperature then. Scores are scaled by 1/sqrt(head size).
#include <memory>

#include "formats/gguf/gguf_file.hpp"
#include "model/arch/arch.hpp"
#include "model/arch/family_support.hpp"
#include "model/blocks/attention.hpp"
#include "model/blocks/embedding.hpp"
#include "model/blocks/ffn.hpp"
#include "model/blocks/moe.hpp"
#include "model/decoder_model.hpp"
#include "model/gen_model/arch_spec.hpp"
#include "model/rope_setup.hpp"
#include "model/weights.hpp"

namespace cortiq {

namespace {

constexpr int64_t kChunk = 8192, kNoRopeStep = 4;

struct Llama4Layer {
  std::vector<float> attn_norm;
  AttentionWeights attn;
  std::vector<float> ffn_norm;
  bool has_experts = false;
  FfnWeights dense;
  MoeWeights moe;
};

struct Llama4Weights {
  TokenEmbedding embedding;
  OutputHead head;
  RopeTables rope;
  std::vector<Llama4Layer> layers;

  void visit(TensorVisitor& v, const ModelHParams& hp) {
    embedding.visit(v, hp);
    head.visit(v, hp, embedding, OutputMatrix::own_or_tied);
    rope.visit(v, hp, /*required=*/false, /*local_too=*/true);
    // llama.cpp decides the Q/K norms by the expert count (Maverick: 128).
    const bool qk_norm = hp.n_expert != 128;
    for (int64_t il = 0; il < hp.n_layer; ++il) {
      Llama4Layer& layer = layers.emplace_back();
      v.vector(layer.attn_norm, layer_tensor_name(il, "attn_norm.weight"), hp.n_embd,
               TensorKind::norm);
      layer.attn.visit(v, hp, il, {.qk_plain_norm_after_rope = qk_norm});
      v.vector(layer.ffn_norm, layer_tensor_name(il, "ffn_norm.weight"), hp.n_embd,
               TensorKind::norm);
      layer.has_experts = hp.layer_has_experts(il);
      if (layer.has_experts) {
        layer.moe.visit(v, hp, il,
                        {.shared_expert = SharedExpert::always, .weights_before_experts = true});
      } else {
        layer.dense.visit(v, hp, il, {.scales_applied = false});
      }
    }
  }
};

class Llama4Model final : public FamilyModel<Llama4Weights> {
 public:
  using FamilyModel::FamilyModel;

 private:
  void run_layers(std::span<const BatchRow> rows, std::span<const int32_t> cells, KvCache& cache,
                  ForwardContext& ctx, std::span<float> logits) const override {
    const auto& h = hparams_;
    const auto n = static_cast<int64_t>(rows.size());
    const auto [x, normed, branch, pass] = start_layers(h, rows, cells, ctx, w_.embedding, w_.rope);
    for (const int64_t il : ctx.stage.layers()) {
      const Llama4Layer& layer = w_.layers[static_cast<size_t>(il)];
      rms_norm(ctx, h, x, layer.attn_norm, normed);
      attention(layer.attn, h, il, pass, cache, ctx, normed, branch);
      ctx.backend.add(x, branch);
      rms_norm(ctx, h, x, layer.ffn_norm, normed);
      if (layer.has_experts) {
        moe_ffn(layer.moe, h, il, n, ctx, normed, branch);
      } else {
        ffn(layer.dense, FfnActivation::swiglu, h, il, n, ctx, normed, branch);
      }
      ctx.backend.add(x, branch);
    }
    w_.head.apply(h, rows, x, ctx, logits);
  }
};

void read_llama4(const HParamReader& keys, ModelHParams& hp) {
  keys.require("attention.layer_norm_rms_epsilon");
  keys.require("expert_feed_forward_length");
  require_whole_rotation(keys, hp);
  hp.attention_scale = 0.0f;
  read_expert_hparams(keys, hp, /*width_key=*/true, /*shared_expert=*/false);
  hp.n_ff_shared_expert = hp.n_ff_expert;
  // llama.cpp gives no layer experts with a step of 0, yet requires them.
  hp.n_moe_layer_step = keys.required_uint("interleave_moe_layer_step");
  if (hp.n_moe_layer_step <= 0) keys.invalid("interleave_moe_layer_step must be positive");
  hp.router.gating = RouterGating::sigmoid;
  hp.router.select_by_scores = true;
  if (keys.has("attention.sliding_window") && keys.uint_or("attention.sliding_window", 0) == 0) {
    keys.invalid(keys.key("attention.sliding_window") +
                 " 0: llama.cpp's llama4 graph asserts on its attention temperature then");
  }
  const gguf::Value* pattern = keys.file().find(keys.key("attention.sliding_window_pattern"));
  const int64_t period = pattern != nullptr && pattern->as_array() != nullptr
                             ? 4
                             : keys.uint_or("attention.sliding_window_pattern", 4);
  if (period <= 0) keys.invalid("attention.sliding_window_pattern must be positive");
  hp.rope_local.freq_base = keys.float_or("rope.freq_base_swa", hp.rope.freq_base);
  for (int64_t il = 0; il < std::ssize(hp.layers); ++il) {
    LayerSpec& layer = hp.layers[static_cast<size_t>(il)];
    const bool chunked = il % period < period - 1;
    layer.chunk = chunked ? kChunk : 0;
    layer.rope = (il + 1) % kNoRopeStep == 0 ? RopeSlot::none
                 : chunked                   ? RopeSlot::local
                                             : RopeSlot::global;
  }
  hp.attn_temperature = {
      .scale = 0.1f, .offset = 1.0f, .floor_scale = kChunk, .unrotated_layers_only = true};
}

// Llama 4 Scout's shape in small: a mixture of experts every second layer,
// 4 experts of which 1 per token (Scout: 16), the chunk pattern's defaults.
void write_llama4(const ModelGeometry& g, std::vector<gguf::KeyValue>& keys) {
  const std::string p = "llama4.";
  write_expert_counts(g, "llama4", keys, /*default_used=*/1);
  keys.push_back({p + "expert_feed_forward_length", u32_value(g.n_ff)});
  keys.push_back({p + "interleave_moe_layer_step", u32_value(2)});
  keys.push_back({p + "attention.sliding_window", u32_value(kChunk)});
  keys.push_back({p + "rope.freq_base_swa", gguf::Value(20000.0f)});
}

}  // namespace

const Family kLlama4Family{.arch = "llama4",
                           .neox_rope = false,
                           .make = make_model<Llama4Model>,
                           .read_hparams = read_llama4,
                           .tensors = tensors_of<Llama4Weights>,
                           .write_hparams = write_llama4};

}  // namespace cortiq
