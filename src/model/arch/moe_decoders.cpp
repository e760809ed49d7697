// Pre-norm decoders whose feed-forward is a mixture of experts
// (blocks/moe.hpp): Qwen1.5/Qwen2-MoE (`qwen2moe`), Qwen3-MoE (`qwen3moe`)
// and AI2's OLMoE (`olmoe`).
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
#include <memory>

#include "model/arch/arch.hpp"
#include "model/arch/family_support.hpp"
#include "model/arch/pre_norm_layer.hpp"
#include "model/arch_spec.hpp"
#include "model/blocks/attention.hpp"
#include "model/blocks/embedding.hpp"
#include "model/blocks/moe.hpp"
#include "model/decoder_model.hpp"
#include "model/rope_setup.hpp"
#include "model/weights.hpp"

namespace cortiq {

namespace {

enum class Kind { qwen2moe, qwen3moe, olmoe };

Kind kind_of(std::string_view arch) {
  return arch == "qwen2moe" ? Kind::qwen2moe : arch == "qwen3moe" ? Kind::qwen3moe : Kind::olmoe;
}

struct MoeDecoderWeights {
  TokenEmbedding embedding;
  OutputHead head;
  RopeTables rope;
  std::vector<PreNormMoeLayer> layers;

  void visit(TensorVisitor& v, const ModelHParams& hp) {
    const Kind kind = kind_of(hp.arch);
    embedding.visit(v, hp);
    head.visit(v, hp, embedding,
               kind == Kind::qwen3moe ? OutputMatrix::own_or_tied : OutputMatrix::own);
    for (int64_t il = 0; il < hp.n_layer; ++il) {
      layers.emplace_back().visit(
          v, hp, il,
          {.qk_norm = kind == Kind::qwen2moe ? QkNorm::none : QkNorm::required,
           .qk_norm_whole = kind == Kind::olmoe,
           .qkv_biases_and_scales_applied = kind != Kind::olmoe},
          {.scales_applied = kind == Kind::qwen3moe,
           .shared_expert = kind == Kind::qwen2moe ? SharedExpert::gated : SharedExpert::none});
    }
  }
};

class MoeDecoderModel final : public FamilyModel<MoeDecoderWeights> {
 public:
  using FamilyModel::FamilyModel;

 private:
  void run_layers(std::span<const BatchRow> rows, std::span<const int32_t> cells, KvCache& cache,
                  ForwardContext& ctx, std::span<float> logits) const override {
    run_pre_norm_layers(w_, hparams_, rows, cells, cache, ctx, logits);
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

// gen-model: four experts, two of them per token, each expert n_ff wide
// (Qwen's converters write the width; OLMoE's is n_ff itself).
void write_expert_keys(const ModelGeometry& g, std::string_view arch, bool width_key,
                       bool shared_expert, std::vector<gguf::KeyValue>& keys) {
  const std::string prefix = std::string(arch) + ".";
  keys.push_back({prefix + "expert_count", u32_value(g.n_expert > 0 ? g.n_expert : 4)});
  keys.push_back(
      {prefix + "expert_used_count", u32_value(g.n_expert_used > 0 ? g.n_expert_used : 2)});
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

constexpr std::string_view kQwen2MoeOptional[] = {"attn_q.bias", "attn_k.bias", "attn_v.bias"};

}  // namespace

const Family kQwen2MoeFamily{.arch = "qwen2moe",
                             .neox_rope = true,
                             .make = make_model<MoeDecoderModel>,
                             .read_hparams = read_qwen_moe,
                             .tensors = tensors_of<MoeDecoderWeights>,
                             .write_hparams = write_qwen2moe,
                             .fixed_head_dim = true,
                             .converted_optional = kQwen2MoeOptional};
const Family kQwen3MoeFamily{.arch = "qwen3moe",
                             .neox_rope = true,
                             .make = make_model<MoeDecoderModel>,
                             .read_hparams = read_qwen_moe,
                             .tensors = tensors_of<MoeDecoderWeights>,
                             .write_hparams = write_qwen3moe};
const Family kOlmoeFamily{.arch = "olmoe",
                          .neox_rope = true,
                          .make = make_model<MoeDecoderModel>,
                          .read_hparams = read_olmoe,
                          .tensors = tensors_of<MoeDecoderWeights>,
                          .write_hparams = write_olmoe,
                          .fixed_head_dim = true};

}  // namespace cortiq
