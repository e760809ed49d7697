// IBM's Granite models on llama.cpp's granite graph: `granite` (Granite
// 3.x), `granitemoe` (Granite 3.x MoE, Granite 4 MoE "shared") and
// `granitehybrid` (Granite 4.0 H). Llama's pre-norm decoder (adjacent-pair
// RoPE, SwiGLU) with four multipliers of the muP kind:
//
//   x = token_embd[token] * embedding_scale
//   for each layer:
//     x += residual_scale * attention(rms_norm(x) * attn_norm)
//                                      scores scaled by attention.scale
//                                      (0: 1/sqrt(head_dim))
//     x += residual_scale * down(silu(gate(h)) * up(h)),  h = rms_norm(x) * ffn_norm
//          or, with expert_count: moe(h) (+ shared(h) with
//          expert_shared_feed_forward_length), softmax routing,
//          renormalized, experts n_ff wide (their gate optional)
//   logits = output(rms_norm(x) * output_norm) * (1 / logit_scale)
//                                      output = token_embd if tied
//
// Granite reads its multipliers from the file (logit_scale required, the
// others 0 = off) and turns RoPE off when rope.scaling.finetuned is false.
// Q/K/V/output and FFN biases are optional; the FFN's per-tensor scales are
// read but llama.cpp's graph applies none of them. llama.cpp runs MiniCPM
// on this graph too (minicpm.cpp, through granite.hpp).
#include <algorithm>
#include <cmath>
#include <memory>

#include "base/error.hpp"
#include "formats/gguf/gguf_file.hpp"
#include "kernels/cpu/activations.hpp"
#include "kernels/cpu/norm.hpp"
#include "model/arch/arch.hpp"
#include "model/arch/family_support.hpp"
#include "model/arch/granite.hpp"
#include "model/blocks/attention.hpp"
#include "model/blocks/embedding.hpp"
#include "model/blocks/ffn.hpp"
#include "model/blocks/mamba2.hpp"
#include "model/blocks/moe.hpp"
#include "model/decoder_model.hpp"
#include "model/gen_model/arch_spec.hpp"
#include "model/rope_setup.hpp"
#include "model/weights.hpp"

namespace cortiq {

namespace {

struct GraniteLayer {
  std::vector<float> attn_norm;
  AttentionWeights attn;
  Mamba2Weights ssm;  // granitehybrid's layers without KV heads, in attention's place
  std::vector<float> ffn_norm;
  FfnWeights ffn;  // or, with experts:
  MoeWeights moe;
};

struct GraniteWeights {
  TokenEmbedding embedding;
  OutputHead head;
  RopeTables rope;
  std::vector<GraniteLayer> layers;

  // As llama.cpp's load_arch_tensors of both (they are the same list).
  void visit(TensorVisitor& v, const ModelHParams& hp) {
    embedding.visit(v, hp);
    head.visit(v, hp, embedding, OutputMatrix::own_or_tied);
    rope.visit(v, hp);
    for (int64_t il = 0; il < hp.n_layer; ++il) {
      GraniteLayer& layer = layers.emplace_back();
      v.vector(layer.attn_norm, layer_tensor_name(il, "attn_norm.weight"), hp.n_embd,
               TensorKind::norm);
      if (hp.layer(il).is_recurrent()) {
        layer.ssm.visit(v, hp, il);
      } else {
        layer.attn.visit(v, hp, il, {.output_bias = AttnOutputBias::optional});
      }
      v.vector(layer.ffn_norm, layer_tensor_name(il, "ffn_norm.weight"), hp.n_embd,
               TensorKind::norm);
      if (hp.n_expert > 0) {
        layer.moe.visit(v, hp, il,
                        {.gate_optional = true,
                         .shared_expert = hp.n_ff_shared_expert > 0 ? SharedExpert::always
                                                                    : SharedExpert::none});
      } else {
        layer.ffn.visit(v, hp, il, {.biases = true, .scales_applied = false});
      }
    }
  }
};

class GraniteModel final : public FamilyModel<GraniteWeights> {
 public:
  using FamilyModel::FamilyModel;

 private:
  void run_layers(std::span<const BatchRow> rows, std::span<const int32_t> cells, KvCache& cache,
                  ForwardContext& ctx, std::span<float> logits) const override {
    const auto& h = hparams_;
    const auto n = rows.size();
    const auto [x, normed, branch, pass] = start_layers(h, rows, cells, ctx, w_.embedding, w_.rope);
    for (const int64_t il : ctx.stage.layers()) {
      const GraniteLayer& layer = w_.layers[static_cast<size_t>(il)];
      rms_norm(ctx, h, x, layer.attn_norm, normed);
      if (h.layer(il).is_recurrent()) {
        mamba2(layer.ssm, h, il, rows, cache, ctx, normed, branch);
      } else {
        attention(layer.attn, h, il, pass, cache, ctx, normed, branch);
      }
      add_scaled(ctx, x, branch);
      rms_norm(ctx, h, x, layer.ffn_norm, normed);
      if (h.n_expert > 0) {
        moe_ffn(layer.moe, h, il, static_cast<int64_t>(n), ctx, normed, branch);
      } else {
        ffn(layer.ffn, FfnActivation::swiglu, h, il, static_cast<int64_t>(n), ctx, normed, branch);
      }
      add_scaled(ctx, x, branch);
    }
    w_.head.apply(h, rows, x, ctx, logits);
  }

  // x += residual_scale * branch: llama.cpp's ggml_scale of the branch, then the add.
  void add_scaled(ForwardContext& ctx, Tensor x, Tensor branch) const {
    if (hparams_.residual_scale != 0.0f) {
      ctx.backend.scale(branch.first(x.size()), hparams_.residual_scale);
    }
    ctx.backend.add(x, branch);
  }
};

}  // namespace

namespace granite_graph {

// llama.cpp asserts what its graph assumes (a fully rotated head, equal K
// and V heads) and reads the norm epsilon as required; experts when the
// file has them (n_ff wide, softmax routing renormalized), granite's
// shared expert when it states its width.
void check_common(const HParamReader& keys, ModelHParams& hp, bool shared_expert) {
  if (!keys.has("attention.layer_norm_rms_epsilon")) {
    throw Error(keys.file().path() + ": missing key " +
                keys.key("attention.layer_norm_rms_epsilon"));
  }
  if (hp.head_dim_k != hp.head_dim_v || hp.rope.n_dims != hp.head_dim_k) {
    keys.invalid("the key and value heads and the rotated dimensions must all be the same size");
  }
  if (keys.uint_or("expert_count", 0) > 0) {
    read_expert_hparams(keys, hp, /*width_key=*/false, /*shared_expert=*/false);
    hp.router.normalize = true;
    if (shared_expert) hp.n_ff_shared_expert = keys.uint_or("expert_shared_feed_forward_length", 0);
  }
}

void set_logit_scale(const HParamReader& keys, ModelHParams& hp, float logit_scale) {
  if (logit_scale == 0.0f) keys.invalid(keys.key("logit_scale") + " must not be 0");
  hp.logit_scale = 1.0f / logit_scale;  // as llama.cpp: ggml_scale by 1 / f_logit_scale
}

// With --experts: a file of experts (gen-model's 4 / 2 by default for
// granitemoe), granitemoe's with a shared expert n_ff wide.
void write_experts(const ModelGeometry& g, std::string_view arch, bool shared,
                   std::vector<gguf::KeyValue>& keys) {
  const std::string p = std::string(arch) + ".";
  keys.push_back({p + "expert_count", u32_value(g.n_expert > 0 ? g.n_expert : 4)});
  keys.push_back({p + "expert_used_count", u32_value(g.n_expert_used > 0 ? g.n_expert_used : 2)});
  if (shared) keys.push_back({p + "expert_shared_feed_forward_length", u32_value(g.n_ff)});
}

std::unique_ptr<DecoderModel> make(ModelHParams hparams, WeightBinder& binder) {
  return make_model<GraniteModel>(std::move(hparams), binder);
}

std::vector<TensorSpec> tensors(const ModelHParams& hparams) {
  return tensors_of<GraniteWeights>(hparams);
}

}  // namespace granite_graph

namespace {

using namespace granite_graph;

// Granite's multipliers (logit_scale required by granite's loader, optional
// for granitehybrid's, where 0 is off as for the others) and its RoPE switch:
// rope.scaling.finetuned = false turns RoPE off. attention.scale is the
// common reader's (0: 1/sqrt(head_dim)), as in granite's graph.
void read_granite_multipliers(const HParamReader& keys, ModelHParams& hp,
                              bool logit_scale_required) {
  const float logit_scale = keys.float_or("logit_scale", 0.0f);
  if (logit_scale_required) {
    if (!keys.has("logit_scale")) {
      throw Error(keys.file().path() + ": missing key " + keys.key("logit_scale"));
    }
    set_logit_scale(keys, hp, logit_scale);
  } else if (logit_scale != 0.0f) {  // granitehybrid's graph: 0 is no scale
    set_logit_scale(keys, hp, logit_scale);
  }
  hp.residual_scale = keys.float_or("residual_scale", 0.0f);
  hp.embedding_scale = keys.float_or("embedding_scale", 0.0f);
  if (!keys.bool_or("rope.scaling.finetuned", true)) {
    for (LayerSpec& layer : hp.layers) layer.rope = RopeSlot::none;
  }
}

void read_granite(const HParamReader& keys, ModelHParams& hp) {
  check_common(keys, hp, /*shared_expert=*/true);
  read_granite_multipliers(keys, hp, /*logit_scale_required=*/true);
  // Granite Vision's deepstack layers add image features to the residual:
  // refused unless the mapping names none (every entry negative).
  if (const gguf::Value* mapping = keys.file().find(keys.key("deepstack_mapping"))) {
    const gguf::Array* array = mapping->as_array();
    const auto* entries = array != nullptr ? array->as<int32_t>() : nullptr;
    if (entries == nullptr || std::ranges::any_of(*entries, [](int32_t e) { return e >= 0; })) {
      keys.invalid("deepstack layers (Granite Vision) are not supported");
    }
  }
}

// Granite 4.0 H (`granitehybrid`): granite's layers, those without KV heads
// Mamba-2 layers (blocks/mamba2.hpp, an inner width of 2 n_embd, which
// llama.cpp asserts) in attention's place; every multiplier optional.
void read_granitehybrid(const HParamReader& keys, ModelHParams& hp) {
  check_common(keys, hp, /*shared_expert=*/true);
  read_ssm_hparams(keys, hp);
  if (hp.ssm.d_inner != 2 * hp.n_embd) keys.invalid("ssm.inner_size must be 2 x embedding_length");
  read_granite_multipliers(keys, hp, /*logit_scale_required=*/false);
  for (LayerSpec& layer : hp.layers) {
    if (layer.n_head_kv == 0) {
      layer.state_width = mamba2_state_width(hp);
      layer.recurrent = RecurrentKind::mamba2;
    }
  }
}

// Granite 3.x 2B's multipliers.
void write_granite_multipliers(std::string_view arch, std::vector<gguf::KeyValue>& keys) {
  const std::string p = std::string(arch) + ".";
  keys.push_back({p + "attention.scale", gguf::Value(0.015625f)});
  keys.push_back({p + "embedding_scale", gguf::Value(12.0f)});
  keys.push_back({p + "residual_scale", gguf::Value(0.22f)});
  keys.push_back({p + "logit_scale", gguf::Value(8.0f)});
}

void write_granite(const ModelGeometry& g, std::vector<gguf::KeyValue>& keys) {
  write_granite_multipliers("granite", keys);
  if (g.n_expert > 0) write_experts(g, "granite", /*shared=*/false, keys);
}

void write_granitemoe(const ModelGeometry& g, std::vector<gguf::KeyValue>& keys) {
  write_granite_multipliers("granitemoe", keys);
  write_experts(g, "granitemoe", /*shared=*/true, keys);
}

// Granite-4.0-H-Tiny's shape in small: every layer Mamba-2 but every
// third and the last (4 of 40 attend there), the state space layers as
// mamba2's gen-model writes them, granite's multipliers, experts with a
// shared one.
void write_granitehybrid(const ModelGeometry& g, std::vector<gguf::KeyValue>& keys) {
  const std::string p = "granitehybrid.";
  write_u32_per_layer(
      p + "attention.head_count_kv", g.n_layer,
      [&](int64_t il) { return attends_in_small(g, il) ? g.n_head_kv : 0; }, keys);
  write_mamba2_keys(g, "granitehybrid", keys);
  write_granite_multipliers("granitehybrid", keys);
  write_experts(g, "granitehybrid", /*shared=*/true, keys);
}

}  // namespace

const Family kGraniteFamily{.arch = "granite",
                            .neox_rope = false,
                            .make = granite_graph::make,
                            .read_hparams = read_granite,
                            .tensors = granite_graph::tensors,
                            .write_hparams = write_granite,
                            .converted_optional = granite_graph::kConverted};
const Family kGraniteMoeFamily{.arch = "granitemoe",
                               .neox_rope = false,
                               .make = granite_graph::make,
                               .read_hparams = read_granite,
                               .tensors = granite_graph::tensors,
                               .write_hparams = write_granitemoe,
                               .converted_optional = granite_graph::kConverted};
const Family kGraniteHybridFamily{.arch = "granitehybrid",
                                  .neox_rope = false,
                                  .make = granite_graph::make,
                                  .read_hparams = read_granitehybrid,
                                  .tensors = granite_graph::tensors,
                                  .write_hparams = write_granitehybrid,
                                  .layers_may_lack_parts = true,
                                  .converted_optional = granite_graph::kConverted};

}  // namespace cortiq
