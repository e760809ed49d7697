// The language models of Alibaba's vision-language Qwen2-VL / Qwen2.5-VL
// (`qwen2vl`), Qwen3-VL (`qwen3vl`) and Qwen3-VL-MoE (`qwen3vlmoe`), for
// text: Qwen2's, Qwen3's and Qwen3-MoE's decoders with multimodal RoPE (M-RoPE), whose head pairs
// are dealt to time, height, width and extra position sections (rope.dimension_sections):
//
//   x = token_embd[token]
//   for each layer:
//     x += attention(rms_norm(x) * attn_norm)     M-RoPE, NeoX pairs
//            qwen3vl: q, k = rms_norm(q) * attn_q_norm, rms_norm(k) *
//            attn_k_norm per head, before RoPE
//     x += down(silu(gate(h)) * up(h)),  h = rms_norm(x) * ffn_norm
//          qwen3vlmoe: moe(h), softmax router, renormalized, SwiGLU experts
//   logits = output(rms_norm(x) * output_norm)    output = token_embd if absent
//
// A text token's position is its own in the first three sections and 0 in
// the extra one (llama.cpp's 4-D positions for tokens), so M-RoPE turns
// every pair as NeoX RoPE does except those of the extra section — with
// Qwen3-VL's interleaved sections ("imrope", [24, 20, 20, 0] over 64 pairs)
// pairs 61 and 62 as well. Images and video (other positions, deepstack
// inputs) are not supported: Qwen3-VL's deepstack layers add the zero
// padding of a token's embedding, nothing.
// Both: the scores scaled by 1/sqrt(head size) whatever attention.scale
// says; no FFN scale applied (build_ffn gets NULL for them); llama.cpp
// asserts RoPE turns the whole head.
// qwen2vl: llama.cpp's loader reads no RMS epsilon (it stays 0) and reads
// output.bias without adding it; attn_q and attn_output are [n_embd, n_embd].
// qwen3vl: a reranker's classification head (cls.output.weight), as Qwen3's.
// qwen3vlmoe: no classifier; the experts expert_feed_forward_length (or
// n_ff / expert_used_count) wide, their scales not applied (llama.cpp's
// graph passes none).
#include <memory>

#include "formats/gguf/gguf_file.hpp"
#include "kernels/cpu/activations.hpp"
#include "model/arch/arch.hpp"
#include "model/arch/family_support.hpp"
#include "model/blocks/attention.hpp"
#include "model/blocks/classifier.hpp"
#include "model/blocks/embedding.hpp"
#include "model/blocks/ffn.hpp"
#include "model/blocks/moe.hpp"
#include "model/blocks/norm.hpp"
#include "model/decoder_model.hpp"
#include "model/gen_model/arch_spec.hpp"
#include "model/rope_setup.hpp"
#include "model/weights.hpp"

namespace cortiq {

namespace {

struct QwenVlLayer {
  Norm attn_norm;
  AttentionWeights attn;
  Norm ffn_norm;
  FfnWeights ffn;  // qwen2vl, qwen3vl
  MoeWeights moe;  // qwen3vlmoe
};

struct QwenVlWeights {
  TokenEmbedding embedding;
  OutputHead head;
  ClassifierHead classifier;  // qwen3vl rerankers
  RopeTables rope;
  std::vector<QwenVlLayer> layers;

  // As llama.cpp's load_arch_tensors of each, plus its generic per-tensor
  // scales (which the attention and FFN blocks add).
  void visit(TensorVisitor& v, const ModelHParams& hp) {
    const bool moe = hp.arch == "qwen3vlmoe", qwen3 = hp.arch == "qwen3vl" || moe;
    embedding.visit(v, hp);
    head.visit(v, hp, embedding, OutputMatrix::own_or_tied);
    if (qwen3 && !moe) {
      classifier.visit(v, hp);
      classifier.softmax = true;
    } else if (!qwen3) {
      v.without_effect("output.bias", hp.n_vocab, TensorKind::bias);
    }
    for (int64_t il = 0; il < hp.n_layer; ++il) {
      QwenVlLayer& layer = layers.emplace_back();
      layer.attn_norm.visit(v, layer_tensor_name(il, "attn_norm"), hp.n_embd, NormKind::rms,
                            hp.rms_eps);
      layer.attn.visit(v, hp, il, {.qk_norm = qwen3 ? QkNorm::required : QkNorm::none});
      layer.ffn_norm.visit(v, layer_tensor_name(il, "ffn_norm"), hp.n_embd, NormKind::rms,
                           hp.rms_eps);
      if (moe) {
        layer.moe.visit(v, hp, il, {});
      } else {
        layer.ffn.visit(v, hp, il, {.scales_applied = false});
      }
    }
  }
};

class QwenVlModel final : public FamilyModel<QwenVlWeights> {
 public:
  using FamilyModel::FamilyModel;

  const ClassifierHead* classifier() const override {
    return w_.classifier.present() ? &w_.classifier : nullptr;
  }

 private:
  void run_layers(std::span<const BatchRow> rows, std::span<const int32_t> cells, KvCache& cache,
                  ForwardContext& ctx, std::span<float> logits) const override {
    const auto& h = hparams_;
    const auto n = rows.size();
    const auto [x, normed, branch, pass] = start_layers(h, rows, cells, ctx, w_.embedding, w_.rope);
    for (const int64_t il : ctx.stage.layers()) {
      const QwenVlLayer& layer = w_.layers[static_cast<size_t>(il)];
      layer.attn_norm.apply(ctx, x, normed);
      attention(layer.attn, h, il, pass, cache, ctx, normed, branch);
      ctx.backend.add(x, branch);
      layer.ffn_norm.apply(ctx, x, normed);
      if (h.n_expert > 0) {
        moe_ffn(layer.moe, h, il, static_cast<int64_t>(n), ctx, normed, branch);
      } else {
        ffn(layer.ffn, FfnActivation::swiglu, h, il, static_cast<int64_t>(n), ctx, normed, branch);
      }
      ctx.backend.add(x, branch);
    }
    w_.head.apply(h, rows, x, ctx, logits);
  }
};

// rope.dimension_sections: required, one number for all four or four
// (llama.cpp's get_key_or_arr); ggml asserts at least one of the first
// three and at most a head's width in all.
void read_sections(const HParamReader& keys, ModelHParams& hp, bool interleaved) {
  if (!keys.has("rope.dimension_sections")) {
    keys.invalid("missing key " + keys.key("rope.dimension_sections"));
  }
  const auto sections = keys.per_layer_uint("rope.dimension_sections", 4, 0);
  int64_t sum = 0;
  for (size_t i = 0; i < 4; ++i) {
    hp.rope.mrope_sections[i] = static_cast<int32_t>(sections[i]);
    sum += sections[i];
  }
  if (sections[0] + sections[1] + sections[2] == 0 || sum > hp.head_dim_k) {
    keys.invalid("rope.dimension_sections must share at most a head among t, h, w (and e)");
  }
  hp.rope.mrope_interleaved = interleaved;
  hp.rope_local = hp.rope;
  require_whole_rotation(keys, hp);
  hp.attention_scale = 0.0f;
}

void read_qwen2vl(const HParamReader& keys, ModelHParams& hp) {
  read_sections(keys, hp, /*interleaved=*/false);
  // llama.cpp's qwen2vl loader reads no attention.layer_norm_rms_epsilon:
  // its RMS norms run with epsilon 0 whatever the file says.
  hp.uses_rms_norm = false;
  hp.rms_eps = 0.0f;
}

void read_qwen3vl(const HParamReader& keys, ModelHParams& hp) {
  keys.require("attention.layer_norm_rms_epsilon");
  read_sections(keys, hp, /*interleaved=*/true);
}

void read_qwen3vlmoe(const HParamReader& keys, ModelHParams& hp) {
  read_qwen3vl(keys, hp);
  read_expert_hparams(keys, hp, /*width_key=*/true, /*shared_expert=*/false);
  hp.router.normalize = true;
}

// The sections of the real checkpoints' 64 pairs ([16, 24, 24, 0] and
// [24, 20, 20, 0]; `parts` in 32nds of the pairs), in proportion for smaller heads.
void write_sections(const ModelGeometry& g, const Family& family, std::array<int64_t, 3> parts,
                    std::vector<gguf::KeyValue>& keys) {
  const int64_t pairs = g.resolved_head_dim() / 2;
  gguf::Array sections = gguf::Array::of(gguf::ValueType::i32);
  auto& items = std::get<std::vector<int32_t>>(sections.items);
  for (const int64_t p : parts) items.push_back(static_cast<int32_t>(pairs * p / 32));
  items.push_back(0);
  keys.push_back(
      {std::string(family.arch) + ".rope.dimension_sections", gguf::Value(std::move(sections))});
}

void write_qwen2vl(const ModelGeometry& g, std::vector<gguf::KeyValue>& keys) {
  write_sections(g, kQwen2VlFamily, {8, 12, 12}, keys);
}

void write_qwen3vl(const ModelGeometry& g, std::vector<gguf::KeyValue>& keys) {
  write_sections(g, kQwen3VlFamily, {12, 10, 10}, keys);
  write_head_size(g, kQwen3VlFamily, keys, /*always=*/true);
  keys.push_back({"qwen3vl.n_deepstack_layers", gguf::Value(uint32_t{3})});
}

// Qwen3-VL-30B-A3B's shape in small: four experts n_ff wide, two per token.
void write_qwen3vlmoe(const ModelGeometry& g, std::vector<gguf::KeyValue>& keys) {
  write_sections(g, kQwen3VlMoeFamily, {12, 10, 10}, keys);
  write_head_size(g, kQwen3VlMoeFamily, keys, /*always=*/true);
  keys.push_back({"qwen3vlmoe.n_deepstack_layers", gguf::Value(uint32_t{3})});
  write_expert_counts(g, "qwen3vlmoe", keys);
  keys.push_back({"qwen3vlmoe.expert_feed_forward_length", u32_value(g.n_ff)});
}

constexpr std::string_view kQwen2VlOptional[] = {"attn_q.bias", "attn_k.bias", "attn_v.bias"};

}  // namespace

const Family kQwen2VlFamily{.arch = "qwen2vl",
                            .neox_rope = true,
                            .make = make_model<QwenVlModel>,
                            .read_hparams = read_qwen2vl,
                            .tensors = tensors_of<QwenVlWeights>,
                            .write_hparams = write_qwen2vl,
                            .fixed_head_dim = true,
                            .converted_optional = kQwen2VlOptional};
const Family kQwen3VlFamily{.arch = "qwen3vl",
                            .neox_rope = true,
                            .make = make_model<QwenVlModel>,
                            .read_hparams = read_qwen3vl,
                            .tensors = tensors_of<QwenVlWeights>,
                            .write_hparams = write_qwen3vl};

const Family kQwen3VlMoeFamily{.arch = "qwen3vlmoe",
                               .neox_rope = true,
                               .make = make_model<QwenVlModel>,
                               .read_hparams = read_qwen3vlmoe,
                               .tensors = tensors_of<QwenVlWeights>,
                               .write_hparams = write_qwen3vlmoe};

}  // namespace cortiq
