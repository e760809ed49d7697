// Mamba-2 (`mamba2`: mamba2-130m ... mamba2-2.7b, Codestral Mamba): a
// pre-norm stack of selective state space layers (blocks/mamba2.hpp) and
// no attention:
//
//   x = token_embd[token]
//   for each layer:
//     x += mamba2(rms_norm(x) * attn_norm)
//   logits = output(rms_norm(x) * output_norm)    output = token_embd if absent
//
// The ssm.* keys give the shapes (all required, as llama.cpp reads them);
// head_count and feed_forward_length (the converter writes 0) are not used. Each sequence
// keeps every layer's convolution and scan state in the KV cache and no
// keys or values: its memory does not grow with its length.
#include <memory>

#include "kernels/cpu/activations.hpp"
#include "model/arch/arch.hpp"
#include "model/arch/family_support.hpp"
#include "model/arch_spec.hpp"
#include "model/blocks/embedding.hpp"
#include "model/blocks/mamba2.hpp"
#include "model/decoder_model.hpp"
#include "model/rope_setup.hpp"
#include "model/weights.hpp"

namespace cortiq {

namespace {

struct Mamba2Layer {
  std::vector<float> norm;  // attn_norm
  Mamba2Weights ssm;
};

struct Mamba2ModelWeights {
  TokenEmbedding embedding;
  OutputHead head;
  RopeTables rope;  // none used
  std::vector<Mamba2Layer> layers;

  void visit(TensorVisitor& v, const ModelHParams& hp) {
    embedding.visit(v, hp);
    head.visit(v, hp, embedding, OutputMatrix::own_or_tied);
    for (int64_t il = 0; il < hp.n_layer; ++il) {
      Mamba2Layer& layer = layers.emplace_back();
      v.vector(layer.norm, layer_tensor_name(il, "attn_norm.weight"), hp.n_embd, TensorKind::norm);
      layer.ssm.visit(v, hp, il);
    }
  }
};

class Mamba2Model final : public FamilyModel<Mamba2ModelWeights> {
 public:
  using FamilyModel::FamilyModel;

 private:
  void run_layers(std::span<const BatchRow> rows, std::span<const int32_t> cells, KvCache& cache,
                  ForwardContext& ctx, std::span<float> logits) const override {
    const auto& h = hparams_;
    const LayerStream s = start_layers(h, rows, cells, ctx, w_.embedding, w_.rope);
    for (int64_t il = 0; il < h.n_layer; ++il) {
      const Mamba2Layer& layer = w_.layers[static_cast<size_t>(il)];
      rms_norm(h, s.x, layer.norm, s.normed);
      mamba2(layer.ssm, h, il, rows, cache, ctx, s.normed, s.branch);
      kernels::add_inplace(s.x, s.branch);
    }
    w_.head.apply(h, rows, s.x, ctx, logits);
  }
};

void read_mamba2(const HParamReader& keys, ModelHParams& hp) {
  keys.require("attention.layer_norm_rms_epsilon");
  read_ssm_hparams(keys, hp);
  // head_count and feed_forward_length (0 from the converter) size nothing
  // here, as in llama.cpp's mamba2 graph.
  for (LayerSpec& layer : hp.layers) {
    layer = LayerSpec{.rope = RopeSlot::none,
                      .state_width = mamba2_state_width(hp),
                      .recurrent = RecurrentKind::mamba2};
  }
}

// mamba2-130m's shape in small: the inner width twice n_embd in heads of
// 16 (heads of 64 in the real models), a state of 16, one group, 4 taps.
void write_mamba2(const ModelGeometry& g, std::vector<gguf::KeyValue>& keys) {
  const std::string p = "mamba2.";
  for (gguf::KeyValue& kv : keys) {
    if (kv.key == p + "attention.head_count" || kv.key == p + "feed_forward_length" ||
        kv.key == p + "attention.head_count_kv") {
      kv.value = u32_value(0);
    }
  }
  write_mamba2_keys(g, "mamba2", keys);
}

}  // namespace

const Family kMamba2Family{.arch = "mamba2",
                           .make = make_model<Mamba2Model>,
                           .read_hparams = read_mamba2,
                           .tensors = tensors_of<Mamba2ModelWeights>,
                           .write_hparams = write_mamba2,
                           .layers_may_lack_parts = true};

}  // namespace cortiq
