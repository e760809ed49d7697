// BigCode's StarCoder2 (`starcoder2`; also IBM's Granite Code 20B/34B) and
// WisdomShell's CodeShell (`codeshell`): a pre-norm decoder with layer norms
// (weight and bias), biases on every projection, NeoX RoPE and an ungated
// GELU feed-forward:
//
//   x = token_embd[token]
//   for each layer:
//     x += attention(layer_norm(x) * attn_norm + attn_norm_b)
//                            Q/K/V biases (optional), output bias
//     x += down(gelu(up(h) + up_b)) + down_b,
//          h = layer_norm(x) * ffn_norm + ffn_norm_b
//   logits = output(layer_norm(x) * output_norm + output_norm_b)
//
// llama.cpp shapes the attention output [n_embd, n_embd] (heads tile
// n_embd), scales the scores by 1/sqrt(head size) whatever attention.scale
// says, and applies no FFN scales (build_ffn gets NULL for them).
// codeshell: the token embedding may be left out of the file (the output
// matrix, then required, embeds the tokens); its converter writes the fused
// attn_qkv (CodeShell's c_attn); RoPE must turn the whole head.
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

struct StarCoder2Layer {
  Norm attn_norm;
  AttentionWeights attn;
  Norm ffn_norm;
  FfnWeights ffn;
};

struct StarCoder2Weights {
  TokenEmbedding embedding;
  OutputHead head;
  RopeTables rope;
  std::vector<StarCoder2Layer> layers;

  void visit(TensorVisitor& v, const ModelHParams& hp) {
    const bool codeshell = hp.arch == "codeshell";
    if (codeshell) {
      // llama.cpp's load_arch_tensors: token_embd optional, output required.
      v.matrix(embedding.table, "token_embd.weight", hp.n_embd, hp.n_vocab, /*required=*/false);
      head.visit(v, hp, embedding, OutputMatrix::own, OutputBias::none, NormKind::layer);
      if (embedding.table.data == nullptr) embedding.table = head.output;
    } else {
      embedding.visit(v, hp);
      head.visit(v, hp, embedding, OutputMatrix::own_or_tied, OutputBias::none, NormKind::layer);
    }
    for (int64_t il = 0; il < hp.n_layer; ++il) {
      StarCoder2Layer& layer = layers.emplace_back();
      layer.attn_norm.visit(v, layer_tensor_name(il, "attn_norm"), hp.n_embd, NormKind::layer,
                            hp.norm_eps);
      layer.attn.visit(v, hp, il,
                       {.fused_qkv_written = codeshell, .output_bias = AttnOutputBias::required});
      layer.ffn_norm.visit(v, layer_tensor_name(il, "ffn_norm"), hp.n_embd, NormKind::layer,
                           hp.norm_eps);
      layer.ffn.visit(v, hp, il,
                      {.gated = false, .biases_required = true, .scales_applied = false});
    }
  }
};

class StarCoder2Model final : public FamilyModel<StarCoder2Weights> {
 public:
  using FamilyModel::FamilyModel;

 private:
  void run_layers(std::span<const BatchRow> rows, std::span<const int32_t> cells, KvCache& cache,
                  ForwardContext& ctx, std::span<float> logits) const override {
    const auto& h = hparams_;
    const auto n = rows.size();
    const auto [x, normed, branch, pass] = start_layers(h, rows, cells, ctx, w_.embedding, w_.rope);
    for (const int64_t il : ctx.stage.layers()) {
      const StarCoder2Layer& layer = w_.layers[static_cast<size_t>(il)];
      layer.attn_norm.apply(ctx, x, normed);
      attention(layer.attn, h, il, pass, cache, ctx, normed, branch);
      ctx.backend.add(x, branch);
      layer.ffn_norm.apply(ctx, x, normed);
      ffn(layer.ffn, FfnActivation::gelu, h, il, static_cast<int64_t>(n), ctx, normed, branch);
      ctx.backend.add(x, branch);
    }
    w_.head.apply(h, rows, x, ctx, logits);
  }
};

void read_starcoder2(const HParamReader& keys, ModelHParams& hp) {
  // Required, as in llama.cpp.
  if (!keys.has("attention.layer_norm_epsilon")) {
    keys.invalid("missing key " + keys.key("attention.layer_norm_epsilon"));
  }
  hp.norm_eps = keys.float_or("attention.layer_norm_epsilon", 0.0f);
  hp.uses_rms_norm = false;
  if (!(hp.norm_eps > 0.0f)) keys.invalid("attention.layer_norm_epsilon must be positive");
  // llama.cpp scales the scores by 1/sqrt(head size) whatever attention.scale says.
  hp.attention_scale = 0.0f;
  if (hp.arch == "codeshell" && hp.rope.n_dims != hp.head_dim_k) {
    keys.invalid("codeshell needs rope.dimension_count = key_length");
  }
}

void write_layer_norm_eps(const ModelGeometry& g, const Family& family,
                          std::vector<gguf::KeyValue>& keys) {
  keys.push_back({std::string(family.arch) + ".attention.layer_norm_epsilon",
                  gguf::Value(static_cast<float>(g.rms_eps))});
}

void write_starcoder2(const ModelGeometry& g, std::vector<gguf::KeyValue>& keys) {
  write_layer_norm_eps(g, kStarCoder2Family, keys);
}

void write_codeshell(const ModelGeometry& g, std::vector<gguf::KeyValue>& keys) {
  write_layer_norm_eps(g, kCodeShellFamily, keys);
}

// StarCoder2's checkpoints have Q/K/V biases; CodeShell's converter writes
// the token embedding and the fused Q/K/V bias.
constexpr std::string_view kStarCoder2Optional[] = {"attn_q.bias", "attn_k.bias", "attn_v.bias"};
constexpr std::string_view kCodeShellOptional[] = {"token_embd.weight", "attn_qkv.bias"};

}  // namespace

const Family kStarCoder2Family{.arch = "starcoder2",
                               .neox_rope = true,
                               .make = make_model<StarCoder2Model>,
                               .read_hparams = read_starcoder2,
                               .tensors = tensors_of<StarCoder2Weights>,
                               .write_hparams = write_starcoder2,
                               .fixed_head_dim = true,
                               .converted_optional = kStarCoder2Optional};

const Family kCodeShellFamily{.arch = "codeshell",
                              .neox_rope = true,
                              .make = make_model<StarCoder2Model>,
                              .read_hparams = read_starcoder2,
                              .tensors = tensors_of<StarCoder2Weights>,
                              .write_hparams = write_codeshell,
                              .fixed_head_dim = true,
                              .converted_optional = kCodeShellOptional};

}  // namespace cortiq
