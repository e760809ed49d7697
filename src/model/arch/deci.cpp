// DeciLM and NVIDIA's Llama-3.1/3.3-Nemotron 49B / 51B / 253B (`deci`):
// Llama's pre-norm decoder whose layers each have their own shape, found by
// architecture search: their own head and KV head counts and FFN width, and
// some without attention, with a linear map in its place, or without FFN:
//
//   x = token_embd[token]
//   for each layer l (heads n_head[l], KV heads n_head_kv[l], FFN n_ff[l]):
//     if n_ff[l] == 0:  the layer changes nothing (see below)
//     n_head > 0, n_head_kv > 0:  h = x + attention(rms_norm(x) * attn_norm)
//                                 GQA, RoPE on adjacent pairs, output bias
//     n_head > 0, n_head_kv = 0:  h = x + attn_output · (rms_norm(x) * attn_norm)
//                                 ("linear attention": no bias, no scale)
//     n_head = 0:                 h = x
//     x = h + down(silu(gate(g) + gate_b) * (up(g) + up_b)) + down_b,
//         g = rms_norm(h) * ffn_norm
//   logits = output(rms_norm(x) * output_norm)   output = token_embd if absent
//
// A layer without FFN (Nemotron Ultra 253B's) is skipped whole by llama.cpp:
// its graph `continue`s before updating the layer's output, so the layer's
// attention is computed and dropped. Cortiq does what llama.cpp does (and
// skips the work); Hugging Face's model keeps that attention.
// The scores are scaled by attention.scale, or 1/sqrt(head size); FFN
// biases are applied, FFN scales not (build_ffn gets NULL for them);
// attn_output.bias is read for every layer and applied in attention only;
// rope_freqs.weight (llama3 scaling) is optional. llama.cpp asserts RoPE
// turns the whole head and that keys and values have one head size.
#include <memory>

#include "formats/gguf/gguf_file.hpp"
#include "kernels/cpu/activations.hpp"
#include "kernels/cpu/matmul.hpp"
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

enum class DeciMixer : uint8_t { attention, linear, none };

DeciMixer mixer_of(const LayerSpec& l) {
  if (l.n_head == 0) return DeciMixer::none;
  return l.n_head_kv == 0 ? DeciMixer::linear : DeciMixer::attention;
}

struct DeciLayer {
  DeciMixer mixer = DeciMixer::attention;
  Norm attn_norm;              // attention and linear layers
  AttentionWeights attn;       // attention layers
  kernels::WeightView linear;  // linear layers: attn_output.weight [n_embd, n_embd]
  Norm ffn_norm;               // layers with an FFN
  FfnWeights ffn;
};

struct DeciWeights {
  TokenEmbedding embedding;
  OutputHead head;
  RopeTables rope;
  std::vector<DeciLayer> layers;

  // As llama.cpp's load_arch_tensors for deci, plus its generic per-tensor
  // scales (which the attention and FFN blocks add).
  void visit(TensorVisitor& v, const ModelHParams& hp) {
    embedding.visit(v, hp);
    head.visit(v, hp, embedding, OutputMatrix::own_or_tied);
    rope.visit(v, hp);
    for (int64_t il = 0; il < hp.n_layer; ++il) {
      const LayerSpec& spec = hp.layer(il);
      const auto name = [&](std::string_view what) { return layer_tensor_name(il, what); };
      DeciLayer& layer = layers.emplace_back();
      layer.mixer = mixer_of(spec);
      if (layer.mixer != DeciMixer::none) {
        layer.attn_norm.visit(v, name("attn_norm"), hp.n_embd, NormKind::rms, hp.rms_eps);
      }
      if (layer.mixer == DeciMixer::attention) {
        layer.attn.visit(v, hp, il, {.output_bias = AttnOutputBias::optional});
      } else {
        if (layer.mixer == DeciMixer::linear) {
          v.matrix(layer.linear, name("attn_output.weight"), hp.n_embd, hp.n_embd);
          v.scale_without_effect(name("attn_output.scale"));
          v.scale_without_effect(name("attn_output.input_scale"));
        }
        v.without_effect(name("attn_output.bias"), hp.n_embd, TensorKind::bias);
      }
      if (spec.n_ff > 0) {
        layer.ffn_norm.visit(v, name("ffn_norm"), hp.n_embd, NormKind::rms, hp.rms_eps);
        layer.ffn.visit(v, hp, il, {.biases = true, .scales_applied = false});
      }
    }
  }
};

class DeciModel final : public FamilyModel<DeciWeights> {
 public:
  using FamilyModel::FamilyModel;

 private:
  void run_layers(std::span<const BatchRow> rows, std::span<const int32_t> cells, KvCache& cache,
                  ForwardContext& ctx, std::span<float> logits) const override {
    const auto& h = hparams_;
    const auto n = rows.size();
    const auto [x, normed, branch, pass] = start_layers(h, rows, cells, ctx, w_.embedding, w_.rope);
    const auto width = n * static_cast<size_t>(h.n_embd);
    for (const int64_t il : ctx.stage.layers()) {
      const DeciLayer& layer = w_.layers[static_cast<size_t>(il)];
      // llama.cpp drops the whole layer when it has no FFN.
      if (h.layer(il).n_ff == 0) continue;
      if (layer.mixer != DeciMixer::none) layer.attn_norm.apply(ctx, x, normed);
      if (layer.mixer == DeciMixer::attention) {
        attention(layer.attn, h, il, pass, cache, ctx, normed, branch);
        ctx.backend.add(x, branch);
      } else if (layer.mixer == DeciMixer::linear) {
        ctx.backend.matmul(layer.linear, normed.first(width), static_cast<int64_t>(n),
                           branch.first(width), h.n_embd);
        ctx.backend.add(x, branch);
      }
      layer.ffn_norm.apply(ctx, x, normed);
      ffn(layer.ffn, FfnActivation::swiglu, h, il, static_cast<int64_t>(n), ctx, normed, branch);
      ctx.backend.add(x, branch);
    }
    w_.head.apply(h, rows, x, ctx, logits);
  }
};

void read_deci(const HParamReader& keys, ModelHParams& hp) {
  // llama.cpp's get_key: required.
  keys.require("attention.layer_norm_rms_epsilon");
  require_whole_rotation(keys, hp);
}

// The layer kinds in turn, as the converter writes them (per-layer arrays,
// the head size given): attention, linear, no attention, no FFN.
void write_deci(const ModelGeometry& g, std::vector<gguf::KeyValue>& keys) {
  const auto per_layer = [&](const std::string& key, const std::function<int64_t(int64_t)>& of) {
    write_u32_per_layer("deci." + key, g.n_layer, of, keys);
  };
  per_layer("attention.head_count", [&](int64_t il) { return il % 4 == 2 ? 0 : g.n_head; });
  per_layer("attention.head_count_kv",
            [&](int64_t il) { return il % 4 == 1 || il % 4 == 2 ? 0 : g.n_head_kv; });
  per_layer("feed_forward_length", [&](int64_t il) { return il % 4 == 3 ? 0 : g.n_ff; });
  write_head_size(g, kDeciFamily, keys, /*always=*/true);
}

}  // namespace

const Family kDeciFamily{.arch = "deci",
                         .neox_rope = false,
                         .make = make_model<DeciModel>,
                         .read_hparams = read_deci,
                         .tensors = tensors_of<DeciWeights>,
                         .write_hparams = write_deci,
                         .layers_may_lack_parts = true};

}  // namespace cortiq
