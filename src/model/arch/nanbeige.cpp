// Nanbeige (`nanbeige`): Llama's pre-norm decoder, whose layers may be run
// several times over (looped layers, each pass with its own KV cache rows):
//
//   x = token_embd[token]
//   for loop in 0 .. num_loops - 1:
//     for each physical layer:
//       x += attention(rms_norm(x) * attn_norm)   GQA, RoPE: adjacent pairs,
//                                                 rope_freqs factors if present
//       x += down(silu(gate(h)) * up(h)),  h = rms_norm(x) * ffn_norm
//     unless last loop or skip_loop_final_norm:  x = rms_norm(x) * output_norm
//   logits = output(rms_norm(x) * output_norm)    output = token_embd if tied
//
// llama.cpp expands block_count physical layers into block_count * num_loops
// logical ones (KV cache, hyper-parameters) that share the physical weights;
// so does this file. Q/K/V biases are optional (create_tensor_qkv); the FFN
// scales are applied (build_ffn gets them); attention.scale is not read
// (1/sqrt(head size)); keys and values must have one head size.
#include <memory>

#include "formats/gguf/gguf_file.hpp"
#include "kernels/cpu/activations.hpp"
#include "model/arch/arch.hpp"
#include "model/arch/family_support.hpp"
#include "model/blocks/attention.hpp"
#include "model/blocks/embedding.hpp"
#include "model/blocks/ffn.hpp"
#include "model/decoder_model.hpp"
#include "model/rope_setup.hpp"
#include "model/weights.hpp"

namespace cortiq {

namespace {

constexpr int64_t kMaxLayers = 512;  // llama.cpp's LLAMA_MAX_LAYERS

struct NanbeigeLayer {
  std::vector<float> attn_norm;
  AttentionWeights attn;
  std::vector<float> ffn_norm;
  FfnWeights ffn;
};

struct NanbeigeWeights {
  TokenEmbedding embedding;
  OutputHead head;
  RopeTables rope;
  std::vector<NanbeigeLayer> layers;  // the physical layers

  // hp.n_layer physical layers (the model expands the loops after binding).
  void visit(TensorVisitor& v, const ModelHParams& hp) {
    embedding.visit(v, hp);
    head.visit(v, hp, embedding, OutputMatrix::own_or_tied);
    rope.visit(v, hp);
    for (int64_t il = 0; il < hp.n_layer; ++il) {
      NanbeigeLayer& layer = layers.emplace_back();
      v.vector(layer.attn_norm, layer_tensor_name(il, "attn_norm.weight"), hp.n_embd,
               TensorKind::norm);
      layer.attn.visit(v, hp, il, {});
      v.vector(layer.ffn_norm, layer_tensor_name(il, "ffn_norm.weight"), hp.n_embd,
               TensorKind::norm);
      layer.ffn.visit(v, hp, il, {});
    }
  }
};

class NanbeigeModel final : public DecoderModel {
 public:
  NanbeigeModel(ModelHParams hp, WeightBinder& binder) : DecoderModel(std::move(hp), binder) {
    w_.visit(binder, hparams_);
    // llama.cpp's load_arch_hparams: the logical layers repeat the physical
    // ones' shapes (read_nanbeige checked the keys).
    const HParamReader keys(binder.file(), hparams_.arch);
    n_loops_ = keys.uint_or("num_loops", 1);
    skip_loop_final_norm_ = keys.bool_or("skip_loop_final_norm", false);
    n_phys_ = hparams_.n_layer;
    for (int64_t j = 1; j < n_loops_; ++j) {
      for (int64_t il = 0; il < n_phys_; ++il) hparams_.layers.push_back(hparams_.layer(il));
    }
    hparams_.n_layer = n_phys_ * n_loops_;
    w_.rope.setup(hparams_);
  }

 private:
  void run_layers(std::span<const BatchRow> rows, std::span<const int32_t> cells, KvCache& cache,
                  ForwardContext& ctx, std::span<float> logits) const override {
    const auto& h = hparams_;
    const auto n = rows.size();
    const auto [x, normed, branch, pass] = start_layers(h, rows, cells, ctx, w_.embedding, w_.rope);
    for (const int64_t il : ctx.stage.layers()) {
      const NanbeigeLayer& layer = w_.layers[static_cast<size_t>(il % n_phys_)];
      rms_norm(ctx, h, x, layer.attn_norm, normed);
      attention(layer.attn, h, il, pass, cache, ctx, normed, branch);
      ctx.backend.add(x, branch);
      rms_norm(ctx, h, x, layer.ffn_norm, normed);
      ffn(layer.ffn, FfnActivation::swiglu, h, il, static_cast<int64_t>(n), ctx, normed, branch);
      ctx.backend.add(x, branch);
      // Between loops the stream goes through the final norm.
      const bool loop_end = (il + 1) % n_phys_ == 0 && il + 1 < h.n_layer;
      if (loop_end && !skip_loop_final_norm_) w_.head.norm.apply(ctx, x, x);
    }
    w_.head.apply(h, rows, x, ctx, logits);
  }

  NanbeigeWeights w_;
  int64_t n_phys_ = 0;
  int64_t n_loops_ = 1;
  bool skip_loop_final_norm_ = false;
};

void read_nanbeige(const HParamReader& keys, ModelHParams& hp) {
  keys.require("attention.layer_norm_rms_epsilon");
  if (hp.head_dim_v != hp.head_dim_k) keys.invalid("nanbeige needs key_length = value_length");
  const int64_t loops = keys.uint_or("num_loops", 1);
  if (loops < 1 || hp.n_layer * loops > kMaxLayers) {
    keys.invalid("num_loops must be at least 1, with block_count * num_loops <= 512");
  }
  // llama.cpp never reads ARCH.attention.scale for nanbeige: 1/sqrt(head size).
  hp.attention_scale = 0.0f;
}

}  // namespace

const Family kNanbeigeFamily{.arch = "nanbeige",
                             .neox_rope = false,
                             .make = make_model<NanbeigeModel>,
                             .read_hparams = read_nanbeige,
                             .tensors = tensors_of<NanbeigeWeights>};

}  // namespace cortiq
