// Google's BERT (`bert`) and the sentence-embedding models built on it
// (all-MiniLM, BGE, E5, GTE...), and Nomic's nomic-bert (`nomic-bert`:
// nomic-embed-text v1 / v1.5): text encoders. Their attention reads every
// token of the input in both directions (attention.causal = false, as
// their converters write), they have no output layer, and what they give is
// the last layer's hidden state of every token, which the caller pools into
// one embedding (pooling_type: mean for MiniLM and Nomic, the first token
// for BGE). Post-norm layers, layer norms with biases:
//
//   x = token_embd[token] + token_types[0]  (llama.cpp fixes every token's
//                                            type to 0, "sentence A")
//       bert: + position_embd[pos]
//   x = layer_norm(x) * token_embd_norm + token_embd_norm_b
//   for each layer:
//     x = layer_norm(x + attention(x)) * attn_output_norm + attn_output_norm_b
//            q, k, v = attn_q/k/v(x) + biases (or one attn_qkv); scores
//            scaled by 1/sqrt(head size) whatever attention.scale says;
//            nomic-bert: NeoX RoPE on Q and K (rope.freq_base)
//     x = layer_norm(x + ffn(x)) * layer_output_norm + layer_output_norm_b
//            bert: down(gelu(up(x) + up_b)) + down_b
//            nomic-bert: down(silu(gate(x)) * up(x)), no biases (llama.cpp
//            reads ffn_up/ffn_down biases but its graph passes none)
//   hidden = x
//
// llama.cpp reads the token type count from tokenizer.ggml.token_type_count
// (required); token_types.weight is optional and only its first row is
// used. Not run (refused, naming the tensor or key): the classification head
// of BERT rerankers (cls.*) and nomic-bert's mixture-of-experts layers
// (moe_every_n_layers, nomic-bert-moe).
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

constexpr std::string_view kTokenTypeCountKey = "tokenizer.ggml.token_type_count";

struct BertLayer {
  AttentionWeights attn;
  Norm attn_out_norm;
  FfnWeights ffn;
  Norm out_norm;
};

struct BertWeights {
  TokenEmbedding embedding;
  Norm embedding_norm;  // token_embd_norm
  RopeTables rope;      // unused: no layer rotates
  std::vector<BertLayer> layers;

  void visit(TensorVisitor& v, const ModelHParams& hp) {
    const bool nomic = hp.arch == "nomic-bert";
    embedding.visit(v, hp);
    embedding.visit_token_types(v, hp);
    if (!nomic) embedding.visit_positions(v, hp, /*required=*/true);
    embedding_norm.visit(v, "token_embd_norm", hp.n_embd, NormKind::layer, hp.norm_eps);
    for (int64_t il = 0; il < hp.n_layer; ++il) {
      BertLayer& layer = layers.emplace_back();
      layer.attn.visit(v, hp, il,
                       {.fused_qkv_written = nomic, .output_bias = AttnOutputBias::optional});
      layer.attn_out_norm.visit(v, layer_tensor_name(il, "attn_output_norm"), hp.n_embd,
                                NormKind::layer, hp.norm_eps);
      layer.ffn.visit(v, hp, il, {.gated = nomic, .biases = !nomic, .scales_applied = false});
      if (nomic) {
        v.without_effect(layer_tensor_name(il, "ffn_up.bias"), hp.layer(il).n_ff, TensorKind::bias);
        v.without_effect(layer_tensor_name(il, "ffn_down.bias"), hp.n_embd, TensorKind::bias);
      }
      layer.out_norm.visit(v, layer_tensor_name(il, "layer_output_norm"), hp.n_embd,
                           NormKind::layer, hp.norm_eps);
    }
  }
};

class BertModel final : public FamilyModel<BertWeights> {
 public:
  using FamilyModel::FamilyModel;

 private:
  void run_layers(std::span<const BatchRow> rows, std::span<const int32_t> cells, KvCache& cache,
                  ForwardContext& ctx, std::span<float> hidden) const override {
    const auto& h = hparams_;
    const auto [x, normed, branch, pass] =
        start_layers(h, rows, cells, ctx, w_.embedding, w_.rope, &w_.embedding_norm);
    const FfnActivation activation =
        h.arch == "nomic-bert" ? FfnActivation::swiglu : FfnActivation::gelu;
    for (const int64_t il : ctx.stage.layers()) {
      const BertLayer& layer = w_.layers[static_cast<size_t>(il)];
      attention(layer.attn, h, il, pass, cache, ctx, x, branch);
      ctx.backend.add(x, branch);
      layer.attn_out_norm.apply(ctx, x, x);
      ffn(layer.ffn, activation, h, il, static_cast<int64_t>(rows.size()), ctx, x, branch);
      ctx.backend.add(x, branch);
      layer.out_norm.apply(ctx, x, x);
    }
    copy_output_rows(h, rows, x, ctx, hidden);
  }
};

void read_bert(const HParamReader& keys, ModelHParams& hp) {
  keys.require("attention.layer_norm_epsilon");  // required, as in llama.cpp
  hp.norm_eps = keys.float_or("attention.layer_norm_epsilon", 0.0f);
  hp.uses_rms_norm = false;
  if (!(hp.norm_eps > 0.0f)) keys.invalid("attention.layer_norm_epsilon must be positive");
  if (hp.head_dim_v != hp.head_dim_k) keys.invalid(hp.arch + " needs key_length = value_length");
  const auto types = keys.file().get_uint(std::string(kTokenTypeCountKey));
  if (!types || *types == 0 || *types > 1024) {
    keys.invalid(std::string(kTokenTypeCountKey) +
                 " (the number of token types, usually 2) must be given and positive");
  }
  hp.n_token_types = static_cast<int64_t>(*types);
  // The graph passes its own score scale whatever attention.scale says.
  hp.attention_scale = 0.0f;
  if (hp.arch == "nomic-bert") {
    if (keys.uint_or("moe_every_n_layers", 0) > 0) {
      keys.invalid("moe_every_n_layers > 0: nomic-bert's mixture-of-experts layers are not run");
    }
    return;  // every layer rotates with the model's RoPE table
  }
  for (LayerSpec& layer : hp.layers) layer.rope = RopeSlot::none;
}

// What the encoders' converters write: their layer norm epsilon,
// bidirectional attention, their pooling, two token types.
void write_encoder_keys(const ModelGeometry& g, const std::string& arch, uint32_t pooling,
                        std::vector<gguf::KeyValue>& keys) {
  keys.push_back(
      {arch + ".attention.layer_norm_epsilon", gguf::Value(static_cast<float>(g.rms_eps))});
  keys.push_back({arch + ".attention.causal", gguf::Value(false)});
  keys.push_back({arch + ".pooling_type", gguf::Value(pooling)});
  keys.push_back({std::string(kTokenTypeCountKey), gguf::Value(uint32_t{2})});
}

// As BERT's converter writes for BGE: pooled on the first token.
void write_bert(const ModelGeometry& g, std::vector<gguf::KeyValue>& keys) {
  write_encoder_keys(g, "bert", 2, keys);
}

// As nomic-embed-text's converter writes: mean pooling, RoPE base 1000.
void write_nomic_bert(const ModelGeometry& g, std::vector<gguf::KeyValue>& keys) {
  write_encoder_keys(g, "nomic-bert", 1, keys);
  for (gguf::KeyValue& kv : keys) {
    if (kv.key == "nomic-bert.rope.freq_base") kv.value = gguf::Value(1000.0f);
  }
}

constexpr std::string_view kBertConverted[] = {
    "token_types.weight", "attn_q.bias", "attn_k.bias",  "attn_v.bias",
    "attn_output.bias",   "ffn_up.bias", "ffn_down.bias"};

constexpr std::string_view kNomicBertConverted[] = {"token_types.weight"};

}  // namespace

const Family kBertFamily{.arch = "bert",
                         .make = make_model<BertModel>,
                         .read_hparams = read_bert,
                         .tensors = tensors_of<BertWeights>,
                         .write_hparams = write_bert,
                         .fixed_head_dim = true,
                         .encoder = true,
                         .converted_optional = kBertConverted};

const Family kNomicBertFamily{.arch = "nomic-bert",
                              .neox_rope = true,
                              .make = make_model<BertModel>,
                              .read_hparams = read_bert,
                              .tensors = tensors_of<BertWeights>,
                              .write_hparams = write_nomic_bert,
                              .fixed_head_dim = true,
                              .encoder = true,
                              .converted_optional = kNomicBertConverted};

}  // namespace cortiq
