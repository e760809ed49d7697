// OpenAI's GPT-OSS (`gpt-oss`: gpt-oss-20b, gpt-oss-120b): a pre-norm
// mixture-of-experts decoder whose attention alternates sliding-window and
// full layers, each head with a learned sink.
//
//   x = token_embd[token]
//   for each layer:
//     x += attention(rms_norm(x) * attn_norm)        Q/K/V/O biases, NeoX RoPE
//                                                    (YaRN), per-head sinks
//     x += moe(rms_norm(x) * post_attention_norm)
//   logits = output(rms_norm(x) * output_norm)
//
// Attention: heads rope.dimension_count wide, scores scaled by
// 1/sqrt(head size); the layers of each attention.sliding_window_pattern
// period (default 2) but the last see a window of attention.sliding_window
// positions, with rope.freq_base_swa (default the global base).
// Experts: the router's scores plus its bias choose the k best, a softmax
// over those k weighs them (llama.cpp's softmax_weight gating); each expert
// adds its biases to its gate, up and down products, and its activation is
// the clamped SwiGLU (kernels::swiglu_oai: alpha 1.702, limit 7).
#include <memory>

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

struct GptOssWeights {
  TokenEmbedding embedding;
  OutputHead head;
  RopeTables rope;
  std::vector<PreNormMoeLayer> layers;

  void visit(TensorVisitor& v, const ModelHParams& hp) {
    embedding.visit(v, hp);
    head.visit(v, hp, embedding, OutputMatrix::own);
    for (int64_t il = 0; il < hp.n_layer; ++il) {
      layers.emplace_back().visit(
          v, hp, il, {.output_bias = AttnOutputBias::required, .sinks = true},
          {.router_bias = true, .expert_biases = true, .activation = ExpertActivation::swiglu_oai},
          "post_attention_norm.weight");
    }
  }
};

void read_gpt_oss(const HParamReader& keys, ModelHParams& hp) {
  for (const char* key : {"attention.layer_norm_rms_epsilon", "expert_feed_forward_length",
                          "attention.sliding_window"}) {
    keys.require(key);
  }
  read_expert_hparams(keys, hp, /*width_key=*/true, /*shared_expert=*/false);
  // llama.cpp never reads expert_weights_scale for gpt-oss: no scaling.
  hp.router.gating = RouterGating::softmax_weight;
  // llama.cpp sizes every head by rope.dimension_count and scales the
  // scores by its root, whatever attention.scale says.
  for (const LayerSpec& layer : hp.layers) {
    if (layer.head_dim_k != hp.rope.n_dims || layer.head_dim_v != hp.rope.n_dims) {
      keys.invalid("gpt-oss heads must be rope.dimension_count wide for keys and values");
    }
  }
  hp.attention_scale = 0.0f;
  hp.sliding_window = keys.uint_or("attention.sliding_window", 0);
  if (hp.sliding_window <= 0) keys.invalid("attention.sliding_window must be positive");
  hp.rope_local.freq_base = keys.float_or("rope.freq_base_swa", hp.rope.freq_base);
  set_sliding_window_pattern(hp, hp.sliding_window,
                             keys.uint_or("attention.sliding_window_pattern", 2), RopeSlot::local);
}

// gen-model: four experts (two per token) n_ff wide, the head size stated,
// gen-model's window (16 positions: the goldens cross its edge).
void write_gpt_oss(const ModelGeometry& g, std::vector<gguf::KeyValue>& keys) {
  write_head_size(g, kGptOssFamily, keys, /*always=*/true);
  keys.push_back({"gpt-oss.expert_feed_forward_length", u32_value(g.n_ff)});
  keys.push_back({"gpt-oss.expert_count", u32_value(g.n_expert > 0 ? g.n_expert : 4)});
  keys.push_back(
      {"gpt-oss.expert_used_count", u32_value(g.n_expert_used > 0 ? g.n_expert_used : 2)});
  keys.push_back({"gpt-oss.attention.sliding_window", u32_value(g.resolved_sliding_window())});
}

constexpr std::string_view kGptOssConverted[] = {"attn_q.bias", "attn_k.bias", "attn_v.bias"};

}  // namespace

const Family kGptOssFamily{.arch = "gpt-oss",
                           .neox_rope = true,
                           .make = make_model<PreNormModel<GptOssWeights>>,
                           .read_hparams = read_gpt_oss,
                           .tensors = tensors_of<GptOssWeights>,
                           .write_hparams = write_gpt_oss,
                           .converted_optional = kGptOssConverted};

}  // namespace cortiq
