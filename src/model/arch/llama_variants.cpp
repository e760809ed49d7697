// Four pre-norm decoders llama.cpp runs with graphs of their own that differ
// from Llama's in one or two places each: Ministral 3 / Mistral Small 3.x
// (`mistral3`), ByteDance Seed-OSS (`seed_oss`), LG EXAONE 3 / 3.5
// (`exaone`) and Hugging Face SmolLM3 (`smollm3`).
//
//   x = token_embd[token]
//   for each layer:
//     x += attention(rms_norm(x) * attn_norm)   GQA, SwiGLU below, no Q/K norms;
//                                               RoPE: adjacent pairs (mistral3,
//                                               smollm3), NeoX (seed_oss, exaone)
//     x += down(silu(gate(h)) * up(h)),  h = rms_norm(x) * ffn_norm
//                                               (seed_oss: post_attention_norm)
//   logits = output(rms_norm(x) * output_norm)  output = token_embd if tied
//
// All four may carry Q/K/V biases (llama.cpp's create_tensor_qkv).
// mistral3: Llama's tensors (attention output and FFN biases, rope_freqs);
//   Llama 4's attention temperature: q *= 1 + beta * log(floor(pos / n_ctx_orig) + 1)
//   after RoPE (attention.temperature_scale = beta; 1 below n_ctx_orig).
//   With expert_count > 0 every layer's FFN is a mixture of experts
//   (softmax router, the chosen renormalized, experts n_ff wide with
//   optional gates and their scales, as llama.cpp's mistral3 graph).
// seed_oss: the FFN's pre-norm is named blk.N.post_attention_norm.
// exaone: optional rope_freqs (llama3 scaling); scores always scaled by
//   1/sqrt(head size).
// smollm3: no RoPE in every 4th layer (llama.cpp's n_no_rope_layer_step,
//   fixed at 4).
// None of them reads ARCH.attention.scale; all four assert that RoPE turns
// the whole head and that keys and values have one head size. Only mistral3
// applies FFN scales (NAME.scale): the others pass NULL to build_ffn.
#include <algorithm>
#include <memory>

#include "formats/gguf/gguf_file.hpp"
#include "kernels/cpu/activations.hpp"
#include "kernels/cpu/norm.hpp"
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

enum class Variant { mistral3, seed_oss, exaone, smollm3 };

Variant variant_of(std::string_view arch) {
  if (arch == "mistral3") return Variant::mistral3;
  if (arch == "seed_oss") return Variant::seed_oss;
  return arch == "exaone" ? Variant::exaone : Variant::smollm3;
}

struct VariantLayer {
  std::vector<float> attn_norm;
  AttentionWeights attn;
  std::vector<float> ffn_norm;
  FfnWeights ffn;
  MoeWeights moe;  // mistral3 with experts (Mistral Large 3's text decoder)
};

struct VariantWeights {
  TokenEmbedding embedding;
  OutputHead head;
  RopeTables rope;
  std::vector<VariantLayer> layers;

  // Exactly what each family's load_arch_tensors reads (plus llama.cpp's
  // generic per-tensor scales, which the attention and FFN blocks add).
  void visit(TensorVisitor& v, const ModelHParams& hp) {
    const Variant variant = variant_of(hp.arch);
    const bool mistral3 = variant == Variant::mistral3;
    embedding.visit(v, hp);
    head.visit(v, hp, embedding, OutputMatrix::own_or_tied);
    if (mistral3 || variant == Variant::exaone) rope.visit(v, hp);
    const auto norm = [&](std::vector<float>& w, int64_t il, const char* name) {
      v.vector(w, layer_tensor_name(il, name), hp.n_embd, TensorKind::norm);
    };
    for (int64_t il = 0; il < hp.n_layer; ++il) {
      VariantLayer& layer = layers.emplace_back();
      norm(layer.attn_norm, il, "attn_norm.weight");
      layer.attn.visit(v, hp, il,
                       {.output_bias = mistral3 ? AttnOutputBias::optional : AttnOutputBias::none});
      norm(layer.ffn_norm, il,
           variant == Variant::seed_oss ? "post_attention_norm.weight" : "ffn_norm.weight");
      if (hp.n_expert > 0) {
        layer.moe.visit(v, hp, il, {.gate_optional = true, .scales_applied = true});
      } else {
        layer.ffn.visit(v, hp, il, {.biases = mistral3, .scales_applied = mistral3});
      }
    }
  }
};

class VariantModel final : public DecoderModel {
 public:
  VariantModel(ModelHParams hp, WeightBinder& binder) : DecoderModel(std::move(hp), binder) {
    w_.visit(binder, hparams_);
    w_.rope.setup(hparams_);
  }

 private:
  void run_layers(std::span<const BatchRow> rows, std::span<const int32_t> cells, KvCache& cache,
                  ForwardContext& ctx, std::span<float> logits) const override {
    const auto& h = hparams_;
    const auto n = static_cast<int64_t>(rows.size());
    const auto [x, normed, branch, pass] = start_layers(h, rows, cells, ctx, w_.embedding, w_.rope);
    for (const int64_t il : ctx.stage.layers()) {
      const VariantLayer& layer = w_.layers[static_cast<size_t>(il)];
      rms_norm(ctx, h, x, layer.attn_norm, normed);
      attention(layer.attn, h, il, pass, cache, ctx, normed, branch);
      ctx.backend.add(x, branch);
      rms_norm(ctx, h, x, layer.ffn_norm, normed);
      if (h.n_expert > 0) {
        moe_ffn(layer.moe, h, il, n, ctx, normed, branch);
      } else {
        ffn(layer.ffn, FfnActivation::swiglu, h, il, n, ctx, normed, branch);
      }
      ctx.backend.add(x, branch);
    }
    w_.head.apply(h, rows, x, ctx, logits);
  }

  VariantWeights w_;
};

// What all four graphs assume (llama.cpp asserts it; a file breaking it is
// refused here instead), and the attention scale they use.
void read_common(const HParamReader& keys, ModelHParams& hp) {
  require_whole_rotation(keys, hp);
  // llama.cpp never reads ARCH.attention.scale for these: 1/sqrt(head size).
  hp.attention_scale = 0.0f;
}

void read_mistral3(const HParamReader& keys, ModelHParams& hp) {
  read_common(keys, hp);
  read_yarn_keys(keys, hp.rope, {.log_multiplier = true});
  hp.rope_local = hp.rope;
  // With experts: softmax routing, the chosen renormalized, experts n_ff
  // wide (their gate optional, their scales applied); llama.cpp reads no
  // shared expert width or weights scale for mistral3.
  if (keys.uint_or("expert_count", 0) > 0) {
    read_expert_hparams(keys, hp, /*width_key=*/false, /*shared_expert=*/false);
    hp.router.normalize = true;
  }
  // The temperature, in every layer, steps every n_ctx_orig positions.
  const float temperature = keys.float_or("attention.temperature_scale", 0.0f);
  if (temperature != 0.0f) {
    if (hp.rope.n_ctx_orig == 0) {
      keys.invalid("attention.temperature_scale needs rope.scaling.original_context_length > 0");
    }
    hp.attn_temperature = {.scale = temperature, .floor_scale = hp.rope.n_ctx_orig};
  }
}

void read_smollm3(const HParamReader& keys, ModelHParams& hp) {
  read_common(keys, hp);
  constexpr int64_t kNoRopeLayerStep = 4;
  for (int64_t il = kNoRopeLayerStep - 1; il < hp.n_layer; il += kNoRopeLayerStep) {
    hp.layers[static_cast<size_t>(il)].rope = RopeSlot::none;
  }
}

// Ministral 3's converter: YaRN over the original context and Llama 4's
// attention temperature (llama_4_scaling_beta 0.1). A short original
// context here, so the golden sequences cross several temperature steps.
void write_mistral3(const ModelGeometry& g, std::vector<gguf::KeyValue>& keys) {
  const std::string p = "mistral3.";
  const int64_t original = std::min<int64_t>(g.n_ctx, 16);
  keys.push_back({p + "rope.scaling.type", gguf::Value(std::string("yarn"))});
  keys.push_back({p + "rope.scaling.factor",
                  gguf::Value(static_cast<float>(g.n_ctx) / static_cast<float>(original))});
  keys.push_back({p + "rope.scaling.original_context_length", u32_value(original)});
  keys.push_back({p + "rope.scaling.yarn_beta_fast", gguf::Value(32.0f)});
  keys.push_back({p + "rope.scaling.yarn_beta_slow", gguf::Value(1.0f)});
  keys.push_back({p + "rope.scaling.yarn_log_multiplier", gguf::Value(1.0f)});
  keys.push_back({p + "attention.temperature_scale", gguf::Value(0.1f)});
  // gen-model --experts: Mistral Large 3's mixture of experts.
  if (g.n_expert > 0) {
    keys.push_back({p + "expert_count", u32_value(g.n_expert)});
    keys.push_back({p + "expert_used_count", u32_value(g.n_expert_used > 0 ? g.n_expert_used : 2)});
  }
}

// Seed-OSS's config states head_dim, which the converter always writes.
void write_seed_oss(const ModelGeometry& g, std::vector<gguf::KeyValue>& keys) {
  write_head_size(g, kSeedOssFamily, keys, /*always=*/true);
}

constexpr std::string_view kSeedOssOptional[] = {"attn_q.bias", "attn_k.bias", "attn_v.bias"};
// EXAONE 3.5's llama3 RoPE scaling: the converter writes the factors.
constexpr std::string_view kExaoneOptional[] = {"rope_freqs.weight"};

}  // namespace

const Family kMistral3Family{.arch = "mistral3",
                             .neox_rope = false,
                             .make = make_model<VariantModel>,
                             .read_hparams = read_mistral3,
                             .tensors = tensors_of<VariantWeights>,
                             .write_hparams = write_mistral3};
const Family kSeedOssFamily{.arch = "seed_oss",
                            .neox_rope = true,
                            .make = make_model<VariantModel>,
                            .read_hparams = read_common,
                            .tensors = tensors_of<VariantWeights>,
                            .write_hparams = write_seed_oss,
                            .converted_optional = kSeedOssOptional};
const Family kExaoneFamily{.arch = "exaone",
                           .neox_rope = true,
                           .make = make_model<VariantModel>,
                           .read_hparams = read_common,
                           .tensors = tensors_of<VariantWeights>,
                           .converted_optional = kExaoneOptional};
const Family kSmolLm3Family{.arch = "smollm3",
                            .neox_rope = false,
                            .make = make_model<VariantModel>,
                            .read_hparams = read_smollm3,
                            .tensors = tensors_of<VariantWeights>};

}  // namespace cortiq
