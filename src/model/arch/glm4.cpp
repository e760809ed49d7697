// Zhipu's GLM-4-0414 (`glm4`: GLM-4-9B/32B-0414, GLM-Z1): a decoder with
// RMS norms before and after each branch ("sandwich" norms), RoPE on
// adjacent pairs over half of each head, Q/K/V biases, and a SwiGLU whose
// gate and up projections are one matrix:
//
//   x = token_embd[token]
//   for each layer:
//     x += rms_norm(attention(rms_norm(x) * attn_norm)) * post_attention_norm
//     x += rms_norm(down(silu(g) * u)) * post_ffw_norm,
//          [g | u] = ffn_up(rms_norm(x) * ffn_norm)
//   logits = output(rms_norm(x) * output_norm)    output = token_embd if tied
//
// ChatGLM3 / GLM-4-9B-Chat (`chatglm`): the same without the post norms
// (x += attention(...); x += down(...)), its converter writing the fused
// attn_qkv with its bias; heads must tile n_embd.
//
// llama.cpp scales the scores by 1/sqrt(head size) whatever attention.scale
// says, reads no attention output bias and applies no FFN scales. glm4
// files with multi-token prediction layers (nextn_predict_layers) are
// refused; with M-RoPE sections (GLM-4V) RoPE turns NeoX pairs, as
// llama.cpp's MROPE type, the extra section's pairs unturned for text.
#include <memory>

#include "formats/gguf/gguf_file.hpp"
#include "kernels/cpu/activations.hpp"
#include "kernels/cpu/norm.hpp"
#include "model/arch/arch.hpp"
#include "model/arch/family_support.hpp"
#include "model/blocks/attention.hpp"
#include "model/blocks/embedding.hpp"
#include "model/blocks/ffn.hpp"
#include "model/decoder_model.hpp"
#include "model/gen_model/arch_spec.hpp"
#include "model/rope_setup.hpp"
#include "model/weights.hpp"

namespace cortiq {

namespace {

struct Glm4Layer {
  std::vector<float> attn_norm;
  AttentionWeights attn;
  std::vector<float> attn_post_norm;
  std::vector<float> ffn_norm;
  FfnWeights ffn;
  std::vector<float> ffn_post_norm;
};

struct Glm4Weights {
  TokenEmbedding embedding;
  OutputHead head;
  RopeTables rope;
  std::vector<Glm4Layer> layers;

  void visit(TensorVisitor& v, const ModelHParams& hp) {
    const bool glm4 = hp.arch == "glm4";
    embedding.visit(v, hp);
    head.visit(v, hp, embedding);
    const auto norm = [&](std::vector<float>& w, int64_t il, const char* name) {
      v.vector(w, layer_tensor_name(il, name), hp.n_embd, TensorKind::norm);
    };
    for (int64_t il = 0; il < hp.n_layer; ++il) {
      Glm4Layer& layer = layers.emplace_back();
      norm(layer.attn_norm, il, "attn_norm.weight");
      layer.attn.visit(v, hp, il, {.fused_qkv_written = !glm4});
      if (glm4) norm(layer.attn_post_norm, il, "post_attention_norm.weight");
      norm(layer.ffn_norm, il, "ffn_norm.weight");
      layer.ffn.visit(v, hp, il, {.scales_applied = false, .fused_gate_up = true});
      if (glm4) norm(layer.ffn_post_norm, il, "post_ffw_norm.weight");
    }
  }
};

class Glm4Model final : public FamilyModel<Glm4Weights> {
 public:
  using FamilyModel::FamilyModel;

 private:
  void run_layers(std::span<const BatchRow> rows, std::span<const int32_t> cells, KvCache& cache,
                  ForwardContext& ctx, std::span<float> logits) const override {
    const auto& h = hparams_;
    const auto n = static_cast<int64_t>(rows.size());
    const auto [x, normed, branch, pass] = start_layers(h, rows, cells, ctx, w_.embedding, w_.rope);
    for (const int64_t il : ctx.stage.layers()) {
      const Glm4Layer& layer = w_.layers[static_cast<size_t>(il)];
      rms_norm(ctx, h, x, layer.attn_norm, normed);
      attention(layer.attn, h, il, pass, cache, ctx, normed, branch);
      add_post_normed(ctx, x, branch, layer.attn_post_norm);
      rms_norm(ctx, h, x, layer.ffn_norm, normed);
      ffn(layer.ffn, FfnActivation::swiglu, h, il, n, ctx, normed, branch);
      add_post_normed(ctx, x, branch, layer.ffn_post_norm);
    }
    w_.head.apply(h, rows, x, ctx, logits);
  }

  // x += rms_norm(branch) * post_norm (chatglm: x += branch).
  void add_post_normed(ForwardContext& ctx, Tensor x, Tensor branch,
                       std::span<const float> post_norm) const {
    const auto rows = branch.first(x.size());
    if (!post_norm.empty()) rms_norm(ctx, hparams_, rows, post_norm, rows);
    ctx.backend.add(x, rows);
  }
};

void read_common(const HParamReader& keys, ModelHParams& hp) {
  // Required, as in llama.cpp.
  keys.require("attention.layer_norm_rms_epsilon");
  if (hp.head_dim_k != hp.head_dim_v) keys.invalid("key and value heads must be as wide");
  hp.attention_scale = 0.0f;
}

void read_chatglm(const HParamReader& keys, ModelHParams& hp) {
  read_common(keys, hp);
}

void read_glm4(const HParamReader& keys, ModelHParams& hp) {
  read_common(keys, hp);
  // llama.cpp uses M-RoPE when the first two sections are set (GLM-4V):
  // NeoX pairs then, the extra section's pairs unturned for text.
  if (keys.has("rope.dimension_sections")) {
    const auto sections = keys.per_layer_uint("rope.dimension_sections", 4, 0);
    if (sections[0] > 0 && sections[1] > 0) {
      for (size_t i = 0; i < 4; ++i) hp.rope.mrope_sections[i] = static_cast<int32_t>(sections[i]);
      hp.rope.neox = true;
      hp.rope_local = hp.rope;
    }
  }
}

// Both rotate half of each head (partial_rotary_factor 0.5).
void write_glm4(const ModelGeometry& g, std::vector<gguf::KeyValue>& keys) {
  write_half_rotary(g, "glm4", keys);
}

void write_chatglm(const ModelGeometry& g, std::vector<gguf::KeyValue>& keys) {
  write_half_rotary(g, "chatglm", keys);
}

// GLM-4's checkpoints have Q/K/V biases; ChatGLM's the fused one.
constexpr std::string_view kGlm4Optional[] = {"attn_q.bias", "attn_k.bias", "attn_v.bias"};
constexpr std::string_view kChatGlmOptional[] = {"attn_qkv.bias"};

}  // namespace

const Family kGlm4Family{.arch = "glm4",
                         .neox_rope = false,
                         .make = make_model<Glm4Model>,
                         .read_hparams = read_glm4,
                         .tensors = tensors_of<Glm4Weights>,
                         .write_hparams = write_glm4,
                         .converted_optional = kGlm4Optional};
// llama.cpp shapes chatglm's attn_output [n_embd, n_embd]: heads must tile n_embd.
const Family kChatGlmFamily{.arch = "chatglm",
                            .neox_rope = false,
                            .make = make_model<Glm4Model>,
                            .read_hparams = read_chatglm,
                            .tensors = tensors_of<Glm4Weights>,
                            .write_hparams = write_chatglm,
                            .fixed_head_dim = true,
                            .converted_optional = kChatGlmOptional};

}  // namespace cortiq
