// WisdomShell's CodeShell (`codeshell`): StarCoder2's pre-norm decoder with
// layer norms, biases on every projection, NeoX RoPE and an ungated GELU
// feed-forward; the token embedding may be left out of the file (then the
// output matrix embeds the tokens):
//
//   x = (token_embd or output)[token]
//   for each layer:
//     x += attention(layer_norm(x) * attn_norm + attn_norm_b)
//                            Q/K/V biases (optional), output bias
//     x += down(gelu(up(h) + up_b)) + down_b,
//          h = layer_norm(x) * ffn_norm + ffn_norm_b
//   logits = output(layer_norm(x) * output_norm + output_norm_b)
//
// llama.cpp shapes attn_q and attn_output [n_embd, n_embd] (heads tile
// n_embd), reads no attention.scale (1/sqrt(head size)), applies no FFN
// scales (build_ffn gets NULL for them) and asserts that RoPE turns the whole
// head. Its converter writes the fused attn_qkv (CodeShell's c_attn).
#include <memory>

#include "formats/gguf/gguf_file.hpp"
#include "kernels/cpu/activations.hpp"
#include "model/arch/arch.hpp"
#include "model/arch/family_support.hpp"
#include "model/arch_spec.hpp"
#include "model/blocks/attention.hpp"
#include "model/blocks/embedding.hpp"
#include "model/blocks/ffn.hpp"
#include "model/blocks/norm.hpp"
#include "model/decoder_model.hpp"
#include "model/rope_setup.hpp"
#include "model/weights.hpp"

namespace cortiq {

namespace {

struct CodeShellLayer {
  Norm attn_norm;
  AttentionWeights attn;
  Norm ffn_norm;
  FfnWeights ffn;
};

struct CodeShellWeights {
  TokenEmbedding embedding;
  OutputHead head;
  RopeTables rope;
  std::vector<CodeShellLayer> layers;

  void visit(TensorVisitor& v, const ModelHParams& hp) {
    // llama.cpp's load_arch_tensors: token_embd optional, output required.
    v.matrix(embedding.table, "token_embd.weight", hp.n_embd, hp.n_vocab, /*required=*/false);
    head.visit(v, hp, embedding, OutputMatrix::own, OutputBias::none, NormKind::layer);
    if (embedding.table.data == nullptr) embedding.table = head.output;
    for (int64_t il = 0; il < hp.n_layer; ++il) {
      CodeShellLayer& layer = layers.emplace_back();
      layer.attn_norm.visit(v, layer_tensor_name(il, "attn_norm"), hp.n_embd, NormKind::layer,
                            hp.norm_eps);
      layer.attn.visit(v, hp, il, {.output_bias_required = true, .fused_qkv_written = true});
      layer.ffn_norm.visit(v, layer_tensor_name(il, "ffn_norm"), hp.n_embd, NormKind::layer,
                           hp.norm_eps);
      layer.ffn.visit(v, hp, il,
                      {.gated = false, .biases_required = true, .scales_applied = false});
    }
  }
};

class CodeShellModel final : public DecoderModel {
 public:
  CodeShellModel(ModelHParams hp, WeightBinder& binder) : DecoderModel(std::move(hp), binder) {
    w_.visit(binder, hparams_);
    w_.rope.setup(hparams_);
  }

 private:
  void run_layers(std::span<const BatchRow> rows, std::span<const int32_t> cells, KvCache& cache,
                  ForwardContext& ctx, std::span<float> logits) const override {
    const auto& h = hparams_;
    const auto n = rows.size();
    const auto [x, normed, branch, pass] = start_layers(h, rows, cells, ctx, w_.embedding, w_.rope);
    for (int64_t il = 0; il < h.n_layer; ++il) {
      const CodeShellLayer& layer = w_.layers[static_cast<size_t>(il)];
      layer.attn_norm.apply(x, normed);
      attention(layer.attn, h, il, pass, cache, ctx, normed, branch);
      kernels::add_inplace(x, branch);
      layer.ffn_norm.apply(x, normed);
      ffn(layer.ffn, FfnActivation::gelu, h, il, static_cast<int64_t>(n), ctx, normed, branch);
      kernels::add_inplace(x, branch);
    }
    w_.head.apply(h, rows, x, ctx, logits);
  }

  CodeShellWeights w_;
};

void read_codeshell(const HParamReader& keys, ModelHParams& hp) {
  // Required, as in llama.cpp.
  if (!keys.has("attention.layer_norm_epsilon")) {
    keys.invalid("missing key " + keys.key("attention.layer_norm_epsilon"));
  }
  hp.norm_eps = keys.float_or("attention.layer_norm_epsilon", 0.0f);
  hp.uses_rms_norm = false;
  if (!(hp.norm_eps > 0.0f)) keys.invalid("attention.layer_norm_epsilon must be positive");
  if (hp.rope.n_dims != hp.head_dim_k) {
    keys.invalid("codeshell needs rope.dimension_count = key_length");
  }
  hp.attention_scale = 0.0f;
}

void write_codeshell(const ModelGeometry& g, std::vector<gguf::KeyValue>& keys) {
  keys.push_back(
      {"codeshell.attention.layer_norm_epsilon", gguf::Value(static_cast<float>(g.rms_eps))});
}

// The converter writes the token embedding and the fused Q/K/V bias.
constexpr std::string_view kCodeShellOptional[] = {"token_embd.weight", "attn_qkv.bias"};

}  // namespace

const Family kCodeShellFamily{.arch = "codeshell",
                              .neox_rope = true,
                              .make = make_model<CodeShellModel>,
                              .read_hparams = read_codeshell,
                              .tensors = tensors_of<CodeShellWeights>,
                              .write_hparams = write_codeshell,
                              .fixed_head_dim = true,
                              .converted_optional = kCodeShellOptional};

}  // namespace cortiq
