// OpenAI's GPT-2 (`gpt2`) and the decoders llama.cpp runs on the same
// pre-norm shape — layer norms, one fused Q/K/V projection, biases, an
// ungated GELU feed-forward, no RoPE: BigCode's StarCoder (`starcoder`: MQA),
// BigScience's BLOOM (`bloom`: ALiBi, a norm after the embedding), MosaicML's
// MPT (`mpt`: ALiBi, optional biases, Q/K norms and Q/K/V clamp) and G42's
// Jais (`jais`: ALiBi, SwiGLU with biases):
//
//   x = token_embd[token] + position_embd[pos]      gpt2, starcoder; mpt: when
//                                                   the file has position_embd
//   bloom: x = layer_norm(x) * token_embd_norm + token_embd_norm_b
//   for each layer:
//     x += attention(layer_norm(x) * attn_norm + attn_norm_b)
//            q, k, v = split(attn_qkv(h) + attn_qkv_b); mpt: clamped to
//            ±clamp_kqv, then layer norms over the whole Q and K (attn_q_norm,
//            attn_k_norm) when the file has them; scores + ALiBi (bloom, mpt,
//            jais); output bias
//     x += down(gelu(up(h) + up_b)) + down_b,  h = layer_norm(x) * ffn_norm + ffn_norm_b
//            mpt: gelu(...) / ffn.act.scales when present (AWQ)
//            jais: down(silu(gate(h) + gate_b) * (up(h) + up_b)) + down_b
//   logits = output(layer_norm(x) * output_norm + output_norm_b)
//            output = token_embd if absent (jais: always its own)
//
// Every bias is required except in MPT, where each (norm biases included)
// is optional. Scores are scaled by 1/sqrt(head size) (jais: 1/head size)
// whatever attention.scale says; no FFN scale is applied (build_ffn gets
// NULL for them). llama.cpp fixes BLOOM's ALiBi max bias at 8; MPT and Jais
// read attention.max_alibi_bias (default 0: no ALiBi), MPT also
// attention.clamp_kqv (0: no clamp). llama.cpp shapes the attention output
// [n_embd, n_embd] (heads tile n_embd), needs attn_qkv (Q/K/V apart are not
// read) and keys and values of one head size.
#include <algorithm>
#include <memory>

#include "formats/gguf/gguf_file.hpp"
#include "kernels/cpu/activations.hpp"
#include "model/arch/arch.hpp"
#include "model/arch/family_support.hpp"
#include "model/blocks/attention.hpp"
#include "model/blocks/embedding.hpp"
#include "model/blocks/ffn.hpp"
#include "model/blocks/norm.hpp"
#include "model/decoder_model.hpp"
#include "model/gen_model/arch_spec.hpp"
#include "model/rope_setup.hpp"
#include "model/weights.hpp"

namespace cortiq {

namespace {

struct Gpt2Layer {
  Norm attn_norm;
  AttentionWeights attn;
  Norm ffn_norm;
  FfnWeights ffn;
};

struct Gpt2Weights {
  TokenEmbedding embedding;
  Norm embedding_norm;  // bloom's token_embd_norm
  OutputHead head;
  RopeTables rope;  // unused: no layer rotates
  std::vector<Gpt2Layer> layers;

  void visit(TensorVisitor& v, const ModelHParams& hp) {
    const bool mpt = hp.arch == "mpt", jais = hp.arch == "jais", bloom = hp.arch == "bloom";
    // MPT's biases are all optional; the others' all required.
    const bool biases = !mpt;
    embedding.visit(v, hp);
    if (hp.arch == "gpt2" || hp.arch == "starcoder" || mpt) {
      embedding.visit_positions(v, hp, /*required=*/!mpt);
    }
    if (bloom) {
      embedding_norm.visit(v, "token_embd_norm", hp.n_embd, NormKind::layer, hp.norm_eps);
    }
    head.visit(v, hp, embedding, jais ? OutputMatrix::own : OutputMatrix::own_or_tied,
               OutputBias::none, NormKind::layer, biases);
    for (int64_t il = 0; il < hp.n_layer; ++il) {
      Gpt2Layer& layer = layers.emplace_back();
      layer.attn_norm.visit(v, layer_tensor_name(il, "attn_norm"), hp.n_embd, NormKind::layer,
                            hp.norm_eps, biases);
      layer.attn.visit(v, hp, il,
                       {.qkv = QkvForm::fused,
                        .fused_qkv_bias = biases ? FusedQkvBias::required : FusedQkvBias::optional,
                        .fused_qkv_written = true,
                        .output_bias = biases ? AttnOutputBias::required : AttnOutputBias::optional,
                        .qk_norm = mpt ? QkNorm::optional : QkNorm::none,
                        .qk_norm_shape = QkNormShape::layer_whole});
      layer.ffn_norm.visit(v, layer_tensor_name(il, "ffn_norm"), hp.n_embd, NormKind::layer,
                           hp.norm_eps, biases);
      layer.ffn.visit(v, hp, il,
                      {.gated = jais,
                       .biases = true,
                       .biases_required = biases,
                       .scales_applied = false,
                       .act_scales = mpt});
    }
  }
};

class Gpt2Model final : public FamilyModel<Gpt2Weights> {
 public:
  using FamilyModel::FamilyModel;

 private:
  void run_layers(std::span<const BatchRow> rows, std::span<const int32_t> cells, KvCache& cache,
                  ForwardContext& ctx, std::span<float> logits) const override {
    const auto& h = hparams_;
    const auto n = rows.size();
    const auto [x, normed, branch, pass] =
        start_layers(h, rows, cells, ctx, w_.embedding, w_.rope, &w_.embedding_norm);
    const FfnActivation activation = h.arch == "jais" ? FfnActivation::swiglu : FfnActivation::gelu;
    for (const int64_t il : ctx.stage.layers()) {
      const Gpt2Layer& layer = w_.layers[static_cast<size_t>(il)];
      layer.attn_norm.apply(ctx, x, normed);
      attention(layer.attn, h, il, pass, cache, ctx, normed, branch);
      ctx.backend.add(x, branch);
      layer.ffn_norm.apply(ctx, x, normed);
      ffn(layer.ffn, activation, h, il, static_cast<int64_t>(n), ctx, normed, branch);
      ctx.backend.add(x, branch);
    }
    w_.head.apply(h, rows, x, ctx, logits);
  }
};

void read_gpt2(const HParamReader& keys, ModelHParams& hp) {
  // Required, as in llama.cpp.
  if (!keys.has("attention.layer_norm_epsilon")) {
    keys.invalid("missing key " + keys.key("attention.layer_norm_epsilon"));
  }
  hp.norm_eps = keys.float_or("attention.layer_norm_epsilon", 0.0f);
  hp.uses_rms_norm = false;
  if (!(hp.norm_eps > 0.0f)) keys.invalid("attention.layer_norm_epsilon must be positive");
  if (hp.head_dim_v != hp.head_dim_k) keys.invalid(hp.arch + " needs key_length = value_length");
  // The graphs pass their own score scale whatever attention.scale says.
  hp.attention_scale = hp.arch == "jais" ? 1.0f / static_cast<float>(hp.head_dim_k) : 0.0f;
  if (hp.arch == "bloom") hp.alibi_max_bias = 8.0f;
  if (hp.arch == "mpt" || hp.arch == "jais") {
    hp.alibi_max_bias = keys.float_or("attention.max_alibi_bias", 0.0f);
  }
  if (hp.arch == "mpt") hp.clamp_kqv = keys.float_or("attention.clamp_kqv", 0.0f);
  if (hp.alibi_max_bias < 0.0f || hp.clamp_kqv < 0.0f) {
    keys.invalid("max_alibi_bias and clamp_kqv must not be negative");
  }
  // llama.cpp's rope type NONE: positions come from position_embd or ALiBi.
  for (LayerSpec& layer : hp.layers) layer.rope = RopeSlot::none;
}

void write_layer_norm_eps(const ModelGeometry& g, const Family& family,
                          std::vector<gguf::KeyValue>& keys) {
  keys.push_back({std::string(family.arch) + ".attention.layer_norm_epsilon",
                  gguf::Value(static_cast<float>(g.rms_eps))});
}

void write_gpt2(const ModelGeometry& g, std::vector<gguf::KeyValue>& keys) {
  write_layer_norm_eps(g, kGpt2Family, keys);
}

void write_starcoder(const ModelGeometry& g, std::vector<gguf::KeyValue>& keys) {
  write_layer_norm_eps(g, kStarCoderFamily, keys);
}

void write_bloom(const ModelGeometry& g, std::vector<gguf::KeyValue>& keys) {
  write_layer_norm_eps(g, kBloomFamily, keys);
}

// MPT-7B's alibi_bias_max; a clip_qkv as some MPT checkpoints set, small
// enough to cut random weights' projections (2 moves the logits by ~16 %).
void write_mpt(const ModelGeometry& g, std::vector<gguf::KeyValue>& keys) {
  write_layer_norm_eps(g, kMptFamily, keys);
  keys.push_back({"mpt.attention.max_alibi_bias", gguf::Value(8.0f)});
  keys.push_back({"mpt.attention.clamp_kqv", gguf::Value(2.0f)});
}

// Jais's converter derives the max bias from its slopes: 8.
void write_jais(const ModelGeometry& g, std::vector<gguf::KeyValue>& keys) {
  write_layer_norm_eps(g, kJaisFamily, keys);
  keys.push_back({"jais.attention.max_alibi_bias", gguf::Value(8.0f)});
}

}  // namespace

const Family kGpt2Family{.arch = "gpt2",
                         .make = make_model<Gpt2Model>,
                         .read_hparams = read_gpt2,
                         .tensors = tensors_of<Gpt2Weights>,
                         .write_hparams = write_gpt2,
                         .fixed_head_dim = true};

const Family kStarCoderFamily{.arch = "starcoder",
                              .make = make_model<Gpt2Model>,
                              .read_hparams = read_gpt2,
                              .tensors = tensors_of<Gpt2Weights>,
                              .write_hparams = write_starcoder,
                              .fixed_head_dim = true};

const Family kBloomFamily{.arch = "bloom",
                          .make = make_model<Gpt2Model>,
                          .read_hparams = read_gpt2,
                          .tensors = tensors_of<Gpt2Weights>,
                          .write_hparams = write_bloom,
                          .fixed_head_dim = true};

const Family kMptFamily{.arch = "mpt",
                        .make = make_model<Gpt2Model>,
                        .read_hparams = read_gpt2,
                        .tensors = tensors_of<Gpt2Weights>,
                        .write_hparams = write_mpt,
                        .fixed_head_dim = true};

const Family kJaisFamily{.arch = "jais",
                         .make = make_model<Gpt2Model>,
                         .read_hparams = read_gpt2,
                         .tensors = tensors_of<Gpt2Weights>,
                         .write_hparams = write_jais,
                         .fixed_head_dim = true};

}  // namespace cortiq
