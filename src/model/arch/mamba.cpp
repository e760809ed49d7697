// Mamba (`mamba`: mamba-130m ... mamba-2.8b, Falcon Mamba 7B): a pre-norm
// stack of selective state space layers (blocks/mamba.hpp) and no attention:
//
//   x = token_embd[token]
//   for each layer:
//     x += mamba(rms_norm(x) * attn_norm)
//   logits = output(rms_norm(x) * output_norm)    output = token_embd if absent
//
// The ssm.* keys give the shapes (required, as llama.cpp reads them; an
// inner width of 2 n_embd, the only one its loader runs); Falcon Mamba's
// ssm.dt_b_c_rms RMS-norms dt, B and C without weights. Each sequence keeps
// every layer's convolution and scan state in the KV cache and no keys or
// values.
#include <memory>

#include "kernels/cpu/activations.hpp"
#include "model/arch/arch.hpp"
#include "model/arch/family_support.hpp"
#include "model/arch_spec.hpp"
#include "model/blocks/embedding.hpp"
#include "model/blocks/mamba.hpp"
#include "model/decoder_model.hpp"
#include "model/rope_setup.hpp"
#include "model/weights.hpp"

namespace cortiq {

namespace {

struct MambaLayer {
  std::vector<float> norm;  // attn_norm
  MambaWeights ssm;
};

struct MambaModelWeights {
  TokenEmbedding embedding;
  OutputHead head;
  RopeTables rope;  // none used
  std::vector<MambaLayer> layers;

  void visit(TensorVisitor& v, const ModelHParams& hp) {
    embedding.visit(v, hp);
    head.visit(v, hp, embedding, OutputMatrix::own_or_tied);
    for (int64_t il = 0; il < hp.n_layer; ++il) {
      MambaLayer& layer = layers.emplace_back();
      v.vector(layer.norm, layer_tensor_name(il, "attn_norm.weight"), hp.n_embd, TensorKind::norm);
      layer.ssm.visit(v, hp, il, /*bcdt_norms=*/false);
    }
  }
};

class MambaModel final : public FamilyModel<MambaModelWeights> {
 public:
  using FamilyModel::FamilyModel;

 private:
  void run_layers(std::span<const BatchRow> rows, std::span<const int32_t> cells, KvCache& cache,
                  ForwardContext& ctx, std::span<float> logits) const override {
    const auto& h = hparams_;
    const LayerStream s = start_layers(h, rows, cells, ctx, w_.embedding, w_.rope);
    for (int64_t il = 0; il < h.n_layer; ++il) {
      const MambaLayer& layer = w_.layers[static_cast<size_t>(il)];
      rms_norm(h, s.x, layer.norm, s.normed);
      mamba(layer.ssm, h, il, rows, cache, ctx, s.normed, s.branch);
      kernels::add_inplace(s.x, s.branch);
    }
    w_.head.apply(h, rows, s.x, ctx, logits);
  }
};

void read_mamba(const HParamReader& keys, ModelHParams& hp) {
  keys.require("attention.layer_norm_rms_epsilon");
  read_mamba_hparams(keys, hp);
  for (LayerSpec& layer : hp.layers) {
    layer = LayerSpec{.rope = RopeSlot::none,
                      .state_width = mamba_state_width(hp),
                      .recurrent = RecurrentKind::mamba};
  }
}

// Falcon Mamba 7B's shape in small: mamba's layers with dt, B and C
// RMS-normed (the plain form is llama.cpp's test model's:
// tools/peer/check-peer-archs.sh).
void write_mamba(const ModelGeometry& g, std::vector<gguf::KeyValue>& keys) {
  const std::string p = "mamba.";
  for (gguf::KeyValue& kv : keys) {
    if (kv.key == p + "attention.head_count" || kv.key == p + "feed_forward_length" ||
        kv.key == p + "attention.head_count_kv") {
      kv.value = u32_value(0);
    }
  }
  write_mamba_keys(g, "mamba", keys);
  keys.push_back({p + "ssm.dt_b_c_rms", gguf::Value(true)});
}

}  // namespace

const Family kMambaFamily{.arch = "mamba",
                          .make = make_model<MambaModel>,
                          .read_hparams = read_mamba,
                          .tensors = tensors_of<MambaModelWeights>,
                          .write_hparams = write_mamba,
                          .layers_may_lack_parts = true};

}  // namespace cortiq
