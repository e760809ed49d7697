// The Llama family: Llama 2 / 3.x, Mistral, TinyLlama, SmolLM2 (`llama`),
// Qwen2 / Qwen2.5 (`qwen2`: Q/K/V biases) and Qwen3 (`qwen3`: per-head RMS
// norms on Q and K). A pre-norm decoder:
//
//   x = token_embd[token]
//   for each layer:
//     x += attention(rms_norm(x) * attn_norm)     GQA, RoPE (adjacent pairs
//                                                 for llama, NeoX for qwen)
//     x += down(silu(gate(h)) * up(h)),  h = rms_norm(x) * ffn_norm
//   logits = output(rms_norm(x) * output_norm)    output = token_embd if tied
//
// A llama file with experts (expert_count > 0: Mixtral) has a mixture of
// experts (blocks/moe.hpp: softmax router, the chosen weights renormalized,
// the experts' scales applied; ffn_gate_exps optional, silu(up) without it)
// in place of each layer's FFN.
//
// The three differ in the tensors a file may carry (llama: output and FFN
// biases; qwen2: lm_head bias; qwen3: Q/K norms, always, and a reranker's
// classification head, cls.output.weight, used by rank pooling), exactly as
// llama.cpp reads them; any of them may carry Q/K/V biases and per-tensor
// scales (NAME.scale).
#include <memory>

#include "formats/gguf/gguf_file.hpp"
#include "kernels/cpu/activations.hpp"
#include "kernels/cpu/norm.hpp"
#include "model/arch/arch.hpp"
#include "model/arch/family_support.hpp"
#include "model/blocks/attention.hpp"
#include "model/blocks/classifier.hpp"
#include "model/blocks/embedding.hpp"
#include "model/blocks/ffn.hpp"
#include "model/blocks/moe.hpp"
#include "model/decoder_model.hpp"
#include "model/gen_model/arch_spec.hpp"
#include "model/rope_setup.hpp"
#include "model/weights.hpp"

namespace cortiq {

namespace {

struct LlamaLayer {
  std::vector<float> attn_norm;
  AttentionWeights attn;
  std::vector<float> ffn_norm;
  FfnWeights ffn;
  MoeWeights moe;  // in place of ffn when the model has experts
};

struct LlamaWeights {
  TokenEmbedding embedding;
  OutputHead head;
  ClassifierHead classifier;  // qwen3 rerankers
  RopeTables rope;
  std::vector<LlamaLayer> layers;

  // In the order llama.cpp's converter writes them; the optional tensors are
  // those llama.cpp reads for each of the three.
  void visit(TensorVisitor& v, const ModelHParams& hp) {
    const bool llama = hp.arch == "llama", qwen2 = hp.arch == "qwen2";
    embedding.visit(v, hp);
    head.visit(v, hp, embedding, OutputMatrix::own_or_tied,
               qwen2 ? OutputBias::optional : OutputBias::none);
    if (hp.arch == "qwen3") {
      classifier.visit(v, hp);
      classifier.softmax = true;
    }
    if (llama) rope.visit(v, hp);
    // No reserve: an absurd block_count must fail at the first missing
    // tensor, not in a huge allocation.
    for (int64_t il = 0; il < hp.n_layer; ++il) {
      LlamaLayer& layer = layers.emplace_back();
      v.vector(layer.attn_norm, layer_tensor_name(il, "attn_norm.weight"), hp.n_embd,
               TensorKind::norm);
      layer.attn.visit(v, hp, il,
                       {.output_bias = llama ? AttnOutputBias::optional : AttnOutputBias::none,
                        .qk_norm = hp.arch == "qwen3" ? QkNorm::required : QkNorm::none});
      v.vector(layer.ffn_norm, layer_tensor_name(il, "ffn_norm.weight"), hp.n_embd,
               TensorKind::norm);
      if (hp.n_expert > 0) {
        layer.moe.visit(v, hp, il, {.gate_optional = true, .scales_applied = true});
      } else {
        layer.ffn.visit(v, hp, il, {.biases = llama, .scales_applied = !qwen2});
      }
    }
  }
};

class LlamaModel final : public FamilyModel<LlamaWeights> {
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
      const LlamaLayer& layer = w_.layers[static_cast<size_t>(il)];
      rms_norm(ctx, h, x, layer.attn_norm, normed);
      attention(layer.attn, h, il, pass, cache, ctx, normed, branch);
      ctx.backend.add(x, branch);
      rms_norm(ctx, h, x, layer.ffn_norm, normed);
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

// Mixtral: the experts are llama.cpp's n_ff wide.
void read_llama(const HParamReader& keys, ModelHParams& hp) {
  if (keys.uint_or("expert_count", 0) > 0) {
    read_expert_hparams(keys, hp, /*width_key=*/false, /*shared_expert=*/false);
    hp.router.normalize = true;  // Mixtral's softmax over the chosen experts
  }
}

// gen-model --experts N: a Mixtral-style file.
void write_llama_hparams(const ModelGeometry& g, std::vector<gguf::KeyValue>& keys) {
  if (g.n_expert == 0) return;
  keys.push_back({"llama.expert_count", u32_value(g.n_expert)});
  keys.push_back({"llama.expert_used_count", u32_value(g.n_expert_used > 0 ? g.n_expert_used : 2)});
}

constexpr std::string_view kLlamaOptional[] = {"ffn_gate_exps.weight"};

// Qwen3's converter always states the head size.
void write_qwen3_hparams(const ModelGeometry& g, std::vector<gguf::KeyValue>& keys) {
  write_head_size(g, kQwen3Family, keys, /*always=*/true);
}

constexpr std::string_view kQwen2Optional[] = {"attn_q.bias", "attn_k.bias", "attn_v.bias"};

}  // namespace

const Family kLlamaFamily{.arch = "llama",
                          .neox_rope = false,
                          .make = make_model<LlamaModel>,
                          .read_hparams = read_llama,
                          .tensors = tensors_of<LlamaWeights>,
                          .write_hparams = write_llama_hparams,
                          .converted_optional = kLlamaOptional};
// llama.cpp's qwen2 shapes attn_output as [n_embd, n_embd]: heads must tile n_embd.
const Family kQwen2Family{.arch = "qwen2",
                          .neox_rope = true,
                          .make = make_model<LlamaModel>,
                          .tensors = tensors_of<LlamaWeights>,
                          .fixed_head_dim = true,
                          .converted_optional = kQwen2Optional};
const Family kQwen3Family{.arch = "qwen3",
                          .neox_rope = true,
                          .make = make_model<LlamaModel>,
                          .tensors = tensors_of<LlamaWeights>,
                          .write_hparams = write_qwen3_hparams};

}  // namespace cortiq
