// The state space models without attention: Mamba (`mamba`: mamba-130m ...
// mamba-2.8b, Falcon Mamba 7B; blocks/mamba.hpp) and Mamba-2 (`mamba2`:
// mamba2-130m ... mamba2-2.7b, Codestral Mamba; blocks/mamba2.hpp). Both
// are a pre-norm stack of one mixer per layer:
//
//   x = token_embd[token]
//   for each layer:
//     x += mixer(rms_norm(x) * attn_norm)
//   logits = output(rms_norm(x) * output_norm)    output = token_embd if absent
//
// The ssm.* keys give the shapes (all required, as llama.cpp reads them;
// Mamba's inner width 2 n_embd, the only one its loader runs); Falcon
// Mamba's ssm.dt_b_c_rms RMS-norms dt, B and C without weights. head_count
// and feed_forward_length (the converters write 0) size nothing. Each
// sequence keeps every layer's convolution and scan state in the KV cache
// and no keys or values: its memory does not grow with its length.
#include <memory>

#include "kernels/cpu/activations.hpp"
#include "model/arch/arch.hpp"
#include "model/arch/family_support.hpp"
#include "model/blocks/embedding.hpp"
#include "model/blocks/mamba.hpp"
#include "model/blocks/mamba2.hpp"
#include "model/decoder_model.hpp"
#include "model/gen_model/arch_spec.hpp"
#include "model/rope_setup.hpp"
#include "model/weights.hpp"

namespace cortiq {

namespace {

// Each mixer's tensors and forward pass, for StateSpaceModel.
void visit_mixer(MambaWeights& w, TensorVisitor& v, const ModelHParams& hp, int64_t il) {
  w.visit(v, hp, il, /*bcdt_norms=*/false);
}
void visit_mixer(Mamba2Weights& w, TensorVisitor& v, const ModelHParams& hp, int64_t il) {
  w.visit(v, hp, il);
}
void run_mixer(const MambaWeights& w, const ModelHParams& hp, int64_t il,
               std::span<const BatchRow> rows, KvCache& cache, ForwardContext& ctx, ConstTensor in,
               Tensor out) {
  mamba(w, hp, il, rows, cache, ctx, in, out);
}
void run_mixer(const Mamba2Weights& w, const ModelHParams& hp, int64_t il,
               std::span<const BatchRow> rows, KvCache& cache, ForwardContext& ctx, ConstTensor in,
               Tensor out) {
  mamba2(w, hp, il, rows, cache, ctx, in, out);
}

template <class Mixer>
struct StateSpaceLayer {
  std::vector<float> norm;  // attn_norm
  Mixer ssm;
};

template <class Mixer>
struct StateSpaceWeights {
  TokenEmbedding embedding;
  OutputHead head;
  RopeTables rope;  // none used
  std::vector<StateSpaceLayer<Mixer>> layers;

  void visit(TensorVisitor& v, const ModelHParams& hp) {
    embedding.visit(v, hp);
    head.visit(v, hp, embedding, OutputMatrix::own_or_tied);
    for (int64_t il = 0; il < hp.n_layer; ++il) {
      StateSpaceLayer<Mixer>& layer = layers.emplace_back();
      v.vector(layer.norm, layer_tensor_name(il, "attn_norm.weight"), hp.n_embd, TensorKind::norm);
      visit_mixer(layer.ssm, v, hp, il);
    }
  }
};

template <class Mixer>
class StateSpaceModel final : public FamilyModel<StateSpaceWeights<Mixer>> {
 public:
  using FamilyModel<StateSpaceWeights<Mixer>>::FamilyModel;

 private:
  void run_layers(std::span<const BatchRow> rows, std::span<const int32_t> cells, KvCache& cache,
                  ForwardContext& ctx, std::span<float> logits) const override {
    const auto& h = this->hparams_;
    const auto& w = this->w_;
    const LayerStream s = start_layers(h, rows, cells, ctx, w.embedding, w.rope);
    for (const int64_t il : ctx.stage.layers()) {
      const StateSpaceLayer<Mixer>& layer = w.layers[static_cast<size_t>(il)];
      rms_norm(ctx, h, s.x, layer.norm, s.normed);
      run_mixer(layer.ssm, h, il, rows, cache, ctx, s.normed, s.branch);
      ctx.backend.add(s.x, s.branch);
    }
    w.head.apply(h, rows, s.x, ctx, logits);
  }
};

// Every layer one mixer of `kind`, its state `state_width` floats.
void state_space_layers(ModelHParams& hp, RecurrentKind kind, int64_t state_width) {
  for (LayerSpec& layer : hp.layers) {
    layer = LayerSpec{.rope = RopeSlot::none, .state_width = state_width, .recurrent = kind};
  }
}

void read_mamba(const HParamReader& keys, ModelHParams& hp) {
  keys.require("attention.layer_norm_rms_epsilon");
  read_mamba_hparams(keys, hp);
  state_space_layers(hp, RecurrentKind::mamba, mamba_state_width(hp));
}

void read_mamba2(const HParamReader& keys, ModelHParams& hp) {
  keys.require("attention.layer_norm_rms_epsilon");
  read_ssm_hparams(keys, hp);
  state_space_layers(hp, RecurrentKind::mamba2, mamba2_state_width(hp));
}

// The converters write 0 heads and no FFN.
void write_no_heads(std::string_view arch, std::vector<gguf::KeyValue>& keys) {
  const std::string p = std::string(arch) + ".";
  for (gguf::KeyValue& kv : keys) {
    if (kv.key == p + "attention.head_count" || kv.key == p + "feed_forward_length" ||
        kv.key == p + "attention.head_count_kv") {
      kv.value = u32_value(0);
    }
  }
}

// Falcon Mamba 7B's shape in small: mamba's layers with dt, B and C
// RMS-normed (the plain form is llama.cpp's test model's:
// tools/peer/check-peer-archs.sh).
void write_mamba(const ModelGeometry& g, std::vector<gguf::KeyValue>& keys) {
  write_no_heads("mamba", keys);
  write_mamba_keys(g, "mamba", keys);
  keys.push_back({"mamba.ssm.dt_b_c_rms", gguf::Value(true)});
}

// mamba2-130m's shape in small: the inner width twice n_embd in heads of
// 16 (heads of 64 in the real models), a state of 16, one group, 4 taps.
void write_mamba2(const ModelGeometry& g, std::vector<gguf::KeyValue>& keys) {
  write_no_heads("mamba2", keys);
  write_mamba2_keys(g, "mamba2", keys);
}

}  // namespace

const Family kMambaFamily{.arch = "mamba",
                          .make = make_model<StateSpaceModel<MambaWeights>>,
                          .read_hparams = read_mamba,
                          .tensors = tensors_of<StateSpaceWeights<MambaWeights>>,
                          .write_hparams = write_mamba,
                          .layers_may_lack_parts = true};
const Family kMamba2Family{.arch = "mamba2",
                           .make = make_model<StateSpaceModel<Mamba2Weights>>,
                           .read_hparams = read_mamba2,
                           .tensors = tensors_of<StateSpaceWeights<Mamba2Weights>>,
                           .write_hparams = write_mamba2,
                           .layers_may_lack_parts = true};

}  // namespace cortiq
